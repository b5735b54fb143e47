//! The simulation's steps run by the tool executor (`Step::drive`): the runtime a
//! `stepjournal` user builds on `Tools` and `drive`, under the same faults and checks.

use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use stepjournal::{DriveError, DriveOptions, Journal, Reply, Run, Step, StepOutcome};
use stepjournal::{RunStatus, WriteError};
use stepjournal_backends::block_on;
use stepjournal_codec::{CallKind, Entry, Event, RawJson, RunOutcome, ToolResult};

use super::check::FencedWrite;
use super::drive_tools::{Rig, late_output};
use super::driver::{End, Sim};
use super::executor::{Driving, Executor, Late};
use super::fault::BodyFault;
use super::flow::{Fired, Halt, Schedule};

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `driving` on this thread until it is done (`Some`) or a handler paused at its fault
/// (`None`).
fn poll_until_paused(driving: &mut Driving, rig: &Rig) -> Option<Result<StepOutcome, DriveError>> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = driving.as_mut().poll(&mut cx) {
            return Some(out);
        }
        if rig.is_paused() {
            return None;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

fn options() -> DriveOptions {
    // Every output is committed as it comes, as the step-by-step runner commits each chunk.
    DriveOptions::new().output_interval(Duration::ZERO)
}

impl Sim<'_> {
    fn executor(&mut self) -> Result<&mut Executor, Halt> {
        match self.executor.as_mut() {
            Some(executor) => Ok(executor),
            None => Err(Halt::Broken),
        }
    }

    /// One run through the executor: the entry, an abandoned step's late writes, the
    /// recovered step, then the script's next replies until the session is over.
    pub(crate) fn drive_through_executor(&mut self, entry: Entry) -> Result<End, Halt> {
        let Some(store) = self.world.store().cloned() else {
            self.world.notes.unexpected("no store is open".to_owned());
            return Err(Halt::Broken);
        };
        let journal = Journal::new(store.clone(), self.registry.clone(), self.options())
            .map_err(|e| self.halt("making the journal", e))?;
        // An abandoned step goes on once this entry has landed; if the entry does not land
        // (a fault fires first), the process that held it is gone with it.
        let late = self.executor()?.late.take();
        let mut run = self.begin(&journal, &store, entry)?;
        if let Some(late) = late {
            self.late_body(late)?;
        }
        if let RunStatus::Ended { outcome: RunOutcome::Stopped, .. } = run.status() {
            return Ok(End::Over(RunOutcome::Stopped));
        }
        if let Some(step) = run.step() {
            self.drive_step(&journal, &mut run, step)?;
        }
        loop {
            // Replies so far: the last one's step (the writer numbers steps 1, 2, ...; the
            // run's view may start at a snapshot, so its replies are not all of them).
            let next = run.with_state(|s| s.last_reply().map_or(0, |r| r.step.get() as usize));
            let Some(spec) = self.world.script.steps.get(next) else {
                run.end(RunOutcome::Completed).map_err(|e| self.halt("ending the run", e))?;
                return Ok(End::Over(RunOutcome::Completed));
            };
            let mut reply = Reply::new(spec.text.clone());
            for call in &spec.calls {
                reply = reply.call(self.call_of(call));
            }
            let step = run
                .commit_reply(reply)
                .map_err(|e| self.halt(format!("committing reply {}", next + 1), e))?;
            self.drive_step(&journal, &mut run, step)?;
        }
    }

    /// Drives `step` to its commit: each suspension answered (the client's answer, the
    /// approver's decision) through the journal, whose woken run is driven on.
    fn drive_step(&mut self, journal: &Journal, run: &mut Run, step: Step) -> Result<(), Halt> {
        let mut step = step;
        loop {
            let awaiting = match self.drive_once(run, &step)? {
                StepOutcome::Suspended { awaiting } => awaiting,
                _ => return Ok(()),
            };
            let number = step.number();
            self.world.notes.trace(format!("step {number} suspended for {awaiting:?}"));
            let mut calls: Vec<_> = self
                .world
                .script
                .steps
                .iter()
                .flat_map(|s| &s.calls)
                .filter(|c| awaiting.contains(&c.id))
                .cloned()
                .collect();
            if self.world.case.reverse_answers {
                calls.reverse();
            }
            let mut woken: Option<Run> = None;
            for call in calls {
                let written = if call.kind == CallKind::Client {
                    let output = RawJson::from_value(&serde_json::json!({ "client": "done" }))
                        .unwrap_or_else(|_| RawJson::null());
                    block_on(journal.answer_client(&self.session, &call.id, output))
                } else {
                    block_on(journal.decide_approval(&self.session, &call.id, call.approve))
                };
                let answered =
                    written.map_err(|e| self.halt(format!("answering {}", call.id), e))?;
                if woken.is_none() {
                    self.runs = self.runs.saturating_add(1);
                    self.world.notes.trace(format!("run {} begins: wake (answers)", answered.id()));
                }
                woken = Some(answered);
            }
            let Some(woken) = woken else { return Err(Halt::Broken) };
            *run = woken;
            match run.step() {
                Some(next) => step = next,
                None => return Ok(()),
            }
        }
    }

    /// Drives `step` once, lending the fault schedule to the handlers; a handler that paused
    /// at its fault decides what becomes of the process.
    fn drive_once(&mut self, run: &Run, step: &Step) -> Result<StepOutcome, Halt> {
        let (rig, tools) = {
            let executor = self.executor()?;
            (executor.rig.clone(), executor.tools.clone())
        };
        rig.lend(std::mem::replace(&mut self.world.faults, Schedule::idle()));
        let mut driving: Driving = {
            let step = step.clone();
            Box::pin(async move { step.drive_with(&tools, options()).await })
        };
        let done = poll_until_paused(&mut driving, &rig);
        if let Some(schedule) = rig.take_back() {
            self.world.faults = schedule;
        }
        match done {
            Some(Ok(outcome)) => Ok(outcome),
            Some(Err(e)) => Err(self.halt(format!("driving step {}", step.number()), e)),
            None => {
                let Some(paused) = rig.take_paused() else { return Err(Halt::Broken) };
                match paused.fault {
                    BodyFault::Crash => {
                        self.world.kill();
                        drop(driving);
                        Err(Halt::Fault(Fired::Body(BodyFault::Crash, None)))
                    }
                    BodyFault::FailRun => {
                        // The runtime fails the run beside its drive, which goes on: a drive
                        // dropped instead would let go of the run, which then could not fail.
                        let why = format!("the runtime gave up on a body of {}", paused.call);
                        run.fail(Some(why)).map_err(|e| self.halt("failing the run", e))?;
                        rig.release();
                        let done = poll_until_paused(&mut driving, &rig);
                        for write in rig.take_fenced() {
                            self.world.notes.fenced(write);
                        }
                        if let Some(Ok(outcome)) = done {
                            return Err(self.halt(
                                "failing the run",
                                format!("the drive of a failed run finished: {outcome:?}"),
                            ));
                        }
                        drop(driving);
                        Err(Halt::Fault(Fired::Body(BodyFault::FailRun, None)))
                    }
                    BodyFault::Abandon => {
                        self.executor()?.late = Some(Late { driving, paused });
                        Err(Halt::Fault(Fired::Body(BodyFault::Abandon, None)))
                    }
                }
            }
        }
    }

    /// The abandoned step goes on after the newer entry landed: its paused body makes its late
    /// writes, and the executor tries to record its result. Both must be refused.
    fn late_body(&mut self, late: Late) -> Result<(), Halt> {
        let Late { mut driving, paused } = late;
        let rig = self.executor()?.rig.clone();
        rig.release();
        let done = poll_until_paused(&mut driving, &rig);
        for write in rig.take_fenced() {
            self.world.notes.fenced(write);
        }
        let (call, attempt) = (paused.call.clone(), paused.attempt);
        let output = RawJson::from_value(&late_output(&call)).unwrap_or_else(|_| RawJson::null());
        let accepted = matches!(done, Some(Ok(_)));
        self.world.notes.fenced(FencedWrite {
            call: call.clone(),
            attempt,
            event: Event::ToolResult(ToolResult {
                call: call.clone(),
                attempt,
                output,
                is_error: false,
                metadata: None,
            }),
            accepted,
        });
        match done {
            Some(Err(e)) if matches!(e.write_error(), Some(WriteError::Fenced { .. })) => {
                self.world.notes.trace(format!("late writes of {call}: fenced ({e})"));
                Ok(())
            }
            // Reported by the check (`FencedWriteAccepted`).
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(self.halt(format!("a late body of {call} was not fenced"), e)),
            None => {
                self.world.notes.unexpected(format!("the late body of {call} paused again"));
                Err(Halt::Broken)
            }
        }
    }
}
