//! Acting on one step: answering client calls and approvals, starting bodies in reply order,
//! running the tools, and firing a body fault where the case puts one.

use stepjournal::{Body, Run, Step};
use stepjournal::{Fence, Refusal, WriteError};
use stepjournal_codec::{CallId, CallKind, Event, OutputChunk, RawJson, ToolResult};
use stepjournal_recovery::{Action, ApprovalState};

use super::check::FencedWrite;
use super::fault::BodyFault;
use super::flow::{Fired, Flow, Halt, World, Zombie};
use super::ledger::LedgerEntry;
use super::script::ScriptCall;
use super::tools::{BodyRun, Cause};

/// How a call's body handle is had.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Begin {
    /// A new body: `start_body`, an `attempt_started`.
    Start,
    /// The child already attached: `reattach`, which starts no body.
    Reattach,
}

/// Acts on the steps of a run for the driver, in the simulation's world.
pub(crate) struct StepRunner<'w, 'a> {
    world: &'w mut World<'a>,
}

/// Whether a call of the run's state waits for an answer from outside (a client's, an
/// approver's).
fn awaits(run: &Run, call: &ScriptCall) -> bool {
    run.with_state(|s| {
        s.call(&call.id).is_some_and(|r| {
            !r.is_resolved()
                && match r.kind() {
                    CallKind::Client => true,
                    CallKind::Approval => r.approval() == ApprovalState::Undecided,
                    _ => false,
                }
        })
    })
}

impl<'w, 'a> StepRunner<'w, 'a> {
    pub(crate) fn new(world: &'w mut World<'a>) -> Self {
        StepRunner { world }
    }

    fn halt(&mut self, doing: impl std::fmt::Display, error: impl std::fmt::Display) -> Halt {
        self.world.halt(doing, error)
    }

    fn unexpected(&mut self, what: String) -> Halt {
        self.world.notes.unexpected(what);
        Halt::Broken
    }

    /// Acts on every unresolved call of `step` in reply order: the entry's plan for a recovered
    /// step, the call's kind for a new one.
    pub(crate) fn act(&mut self, run: &Run, step: &Step, recovered: bool) -> Result<Flow, Halt> {
        let number = step.number();
        let script = self.world.script;
        let Some(spec) = usize::try_from(number.get())
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| script.steps.get(i))
        else {
            return Err(self.unexpected(format!("step {number} is not in the script")));
        };
        if self.world.case.suspend {
            let awaiting: Vec<CallId> =
                spec.calls.iter().filter(|c| awaits(run, c)).map(|c| c.id.clone()).collect();
            if !awaiting.is_empty() && self.world.first_suspension(number) {
                step.suspend(&awaiting)
                    .map_err(|e| self.halt(format!("suspending step {number}"), e))?;
                self.world.notes.trace(format!("step {number} suspended for {awaiting:?}"));
                return Ok(Flow::Suspended);
            }
            // The answers land last call first; the calls are then acted on in reply order.
            if self.world.case.reverse_answers {
                let answering = spec.calls.iter().rev().filter(|c| awaits(run, c));
                for call in answering.cloned().collect::<Vec<_>>() {
                    self.answer(step, &call)?;
                }
            }
        }
        for call in &spec.calls {
            if step.is_resolved(&call.id) {
                continue;
            }
            let action = if recovered { step.action(&call.id).map(|p| p.action) } else { None };
            let begin = match action {
                Some(Action::Keep | Action::Pair { .. }) => continue,
                Some(Action::Reattach { .. } | Action::ReenterChild { .. }) => Begin::Reattach,
                _ => Begin::Start,
            };
            let flow = match call.kind {
                CallKind::Client => {
                    self.answer(step, call)?;
                    Flow::Next
                }
                CallKind::Approval if awaits(run, call) => {
                    self.answer(step, call)?;
                    if call.approve { self.start(run, step, call, begin)? } else { Flow::Next }
                }
                _ => self.start(run, step, call, begin)?,
            };
            if let Flow::Stuck = flow {
                return Ok(Flow::Stuck);
            }
        }
        Ok(Flow::Next)
    }

    /// The answer from outside to a client call (its output) or an approval (the decision).
    fn answer(&mut self, step: &Step, call: &ScriptCall) -> Result<(), Halt> {
        if call.kind == CallKind::Client {
            let output = RawJson::from_value(&serde_json::json!({ "client": "done" }))
                .unwrap_or_else(|_| RawJson::null());
            step.client_answer(&call.id, output)
                .map_err(|e| self.halt(format!("answering client call {}", call.id), e))
        } else {
            step.approval(&call.id, call.approve)
                .map_err(|e| self.halt(format!("deciding approval {}", call.id), e))
        }
    }

    /// The body of `call` `begin` asks for: a new one (recorded in the ledger: a body started),
    /// or the one re-attached to the call's child (not recorded: re-attaching starts nothing).
    /// `Err(flow)` when the call was answered instead (skipped) or cannot be finished.
    fn body_of(
        &mut self,
        step: &Step,
        call: &ScriptCall,
        begin: Begin,
    ) -> Result<Result<Body, Flow>, Halt> {
        if begin == Begin::Reattach {
            match step.reattach(&call.id) {
                Ok(body) => {
                    self.world.notes.trace(format!(
                        "{} re-attached to its child (attempt {})",
                        call.id,
                        body.attempt()
                    ));
                    return Ok(Ok(body));
                }
                // A child attached before any body started, or a companion with no child yet:
                // its first (or next) body starts it.
                Err(WriteError::Refused(Refusal::NoBodyStarted { .. })) => {}
                Err(WriteError::Refused(Refusal::NoChild { .. }))
                    if call.kind == CallKind::Companion => {}
                Err(e) => return Err(self.halt(format!("re-attaching {}", call.id), e)),
            }
        }
        let body = match step.start_body(&call.id) {
            Ok(body) => body,
            Err(WriteError::Refused(Refusal::BehindBlocked { .. })) => {
                step.skip(&call.id)
                    .map_err(|e| self.halt(format!("skipping call {}", call.id), e))?;
                self.world.notes.trace(format!("{} skipped: behind a call in doubt", call.id));
                return Ok(Err(Flow::Next));
            }
            // A remote sub-agent whose child was never attached (`start_child`) with no body
            // left: its child's start is keyed on the dispatch id, so the earlier body goes on
            // (nothing new starts, nothing enters the ledger as a body).
            Err(WriteError::Refused(Refusal::MaxBodies { child: None, .. }))
                if super::check::has_child(call.kind) =>
            {
                match step.reattach(&call.id) {
                    Ok(body) => {
                        self.world.notes.trace(format!(
                            "{} goes on in attempt {} to start its child, keyed on its dispatch id",
                            call.id,
                            body.attempt()
                        ));
                        return Ok(Ok(body));
                    }
                    Err(WriteError::Refused(Refusal::NoChild { .. })) => {
                        return Ok(Err(Flow::Stuck));
                    }
                    Err(e) => return Err(self.halt(format!("re-attaching {}", call.id), e)),
                }
            }
            Err(e) => return Err(self.halt(format!("starting a body of {}", call.id), e)),
        };
        self.world.ledger.record(LedgerEntry::BodyStarted {
            step: step.number(),
            call: call.id.clone(),
            dispatch: body.dispatch().clone(),
            attempt: body.attempt(),
        });
        Ok(Ok(body))
    }

    /// Gets a body of `call` (see [`Sim::body_of`]) and runs its tool to its result, firing the
    /// armed body fault if this is its body (a re-attached body counts: the tool runs in it).
    fn start(
        &mut self,
        run: &Run,
        step: &Step,
        call: &ScriptCall,
        begin: Begin,
    ) -> Result<Flow, Halt> {
        let body = match self.body_of(step, call, begin)? {
            Ok(body) => body,
            Err(flow) => return Ok(flow),
        };
        let number = step.number();
        let fault = self.world.faults.next_body();
        let child = run.with_state(|s| s.call(&call.id).and_then(|r| r.child().cloned()));
        let tools = self.world.tools;
        let Some(tool) = tools.get(call.tool.as_str()) else {
            let what = format!("tool {} of call {} is not in the tool set", call.tool, call.id);
            return Err(self.unexpected(what));
        };
        let ledger = self.world.ledger.clone();
        let mut ctx = BodyRun {
            body: &body,
            step,
            ledger: &ledger,
            call,
            child,
            fault_at: fault.map(|(point, _)| point),
            actions: 0,
            effects: 0,
        };
        let result = ctx
            .before()
            .and_then(|()| tool.behaviour.run(&mut ctx))
            .and_then(|out| ctx.before_result().map(|()| out));
        let effect_done = ctx.effects > 0;
        drop(ctx);
        let interrupted = match result {
            Ok(out) => {
                self.world.ledger.record(LedgerEntry::BodyEnded {
                    step: number,
                    call: call.id.clone(),
                    dispatch: body.dispatch().clone(),
                    attempt: body.attempt(),
                });
                body.finish(out.output, out.is_error)
                    .map_err(|e| self.halt(format!("finishing a body of {}", call.id), e))?;
                return Ok(Flow::Next);
            }
            Err(interrupted) => interrupted,
        };
        let kind = match (interrupted.cause, fault) {
            (Cause::Fault, Some((_, kind))) => kind,
            (Cause::Write(e), _) => return Err(self.halt(format!("a body of {}", call.id), e)),
            (Cause::Fault, None) => {
                let what = format!("a body of {} was interrupted with no fault armed", call.id);
                return Err(self.unexpected(what));
            }
        };
        match kind {
            BodyFault::Crash => {
                self.world.kill();
                Err(Halt::Fault(Fired::Body(BodyFault::Crash, None)))
            }
            BodyFault::Abandon => {
                let zombie =
                    Box::new(Zombie { body, call: call.clone(), step: number, effect_done });
                Err(Halt::Fault(Fired::Body(BodyFault::Abandon, Some(zombie))))
            }
            BodyFault::FailRun => {
                drop(body);
                run.fail(Some(format!("the runtime gave up on a body of {}", call.id)))
                    .map_err(|e| self.halt("failing the run", e))?;
                Err(Halt::Fault(Fired::Body(BodyFault::FailRun, None)))
            }
        }
    }

    /// The abandoned body goes on after the newer entry landed: it performs its effect if it
    /// had not, then tries to write its output and its result. Both must be refused.
    pub(crate) fn late_writes(&mut self, zombie: Zombie) -> Result<(), Halt> {
        let Zombie { body, call, step, effect_done } = zombie;
        let (id, attempt) = (call.id.clone(), body.attempt());
        if !effect_done && !super::check::has_child(call.kind) {
            self.world.ledger.record(LedgerEntry::Effect {
                step,
                call: id.clone(),
                dispatch: body.dispatch().clone(),
                attempt,
                what: format!("{} for {} (late)", call.tool, body.idempotency_key()),
                late: true,
            });
        }
        let text = format!("late output of {id} attempt {attempt}");
        let chunk = body.output_chunk(text.clone());
        self.world.notes.fenced(FencedWrite {
            call: id.clone(),
            attempt,
            event: Event::OutputChunk(OutputChunk { call: id.clone(), attempt, text }),
            accepted: chunk.is_ok(),
        });
        self.expect_fenced(&id, "output_chunk", chunk)?;
        let output = RawJson::from_value(&serde_json::json!({ "late": id.as_str() }))
            .unwrap_or_else(|_| RawJson::null());
        let result = body.finish(output.clone(), false).map_err(WriteError::from);
        self.world.notes.fenced(FencedWrite {
            call: id.clone(),
            attempt,
            event: Event::ToolResult(ToolResult {
                call: id.clone(),
                attempt,
                output,
                is_error: false,
                metadata: None,
            }),
            accepted: result.is_ok(),
        });
        self.expect_fenced(&id, "tool_result", result)
    }

    fn expect_fenced(
        &mut self,
        call: &stepjournal_codec::CallId,
        what: &str,
        result: Result<(), WriteError>,
    ) -> Result<(), Halt> {
        match result {
            // Reported by the check (`FencedWriteAccepted`).
            Ok(()) => Ok(()),
            Err(WriteError::Fenced { by, .. }) => {
                let by = match by {
                    Fence::RunStarted { run, .. } => format!("run_started of {run}"),
                    Fence::RunEnded { run, outcome, .. } => {
                        format!("run_ended {} of {run}", outcome.as_str())
                    }
                    other => format!("{other:?}"),
                };
                self.world.notes.trace(format!("late {what} of {call}: fenced by {by}"));
                Ok(())
            }
            Err(e) => Err(self.halt(format!("a late {what} of {call} was not fenced"), e)),
        }
    }
}
