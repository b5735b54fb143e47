//! The simulated tools as the tool executor runs them: `Tools` whose handlers do what the
//! default [`LedgerTool`](super::LedgerTool) does (an output chunk, then one effect keyed on the
//! dispatch id; a remote sub-agent's child started once per dispatch id), record it in the
//! ledger, and stop where the case puts a body fault: the handler pauses there, and the
//! simulation decides what becomes of it (the process dies, the run is failed, or the run is
//! abandoned and the body goes on late).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use serde_json::{Value, json};
use stepjournal::Tools;
use stepjournal::tools::{BoxFuture, CallCtx, Companion, RemoteAgent, ToolError};
use stepjournal_codec::{
    Attempt, CallId, CallKind, Event, OutputChunk, RawJson, SessionId, StepNo,
};

use super::check::FencedWrite;
use super::fault::BodyFault;
use super::flow::Schedule;
use super::ledger::{Ledger, LedgerEntry};
use super::script::Script;
use super::tools::ToolSet;

/// Where a handler paused for its fault.
#[derive(Debug, Clone)]
pub(crate) struct Paused {
    pub(crate) fault: BodyFault,
    pub(crate) call: CallId,
    pub(crate) attempt: Attempt,
}

/// One body of this process, as its handler goes.
#[derive(Debug, Default)]
struct Going {
    fault_at: Option<(u32, BodyFault)>,
    actions: u32,
    effect_done: bool,
}

/// What the handlers share with the simulation loop.
#[derive(Debug)]
pub(crate) struct Rig {
    ledger: Ledger,
    /// Each call's step (call ids are unique across a script).
    steps: HashMap<CallId, StepNo>,
    /// The fault schedule, lent by the world while a step is driven.
    schedule: Mutex<Option<Schedule>>,
    paused: Mutex<Option<Paused>>,
    /// An abandoned body may go on (its run was fenced meanwhile).
    release: AtomicBool,
    /// The paused body's task, woken when it may go on.
    waiting: Mutex<Option<std::task::Waker>>,
    /// The late writes an abandoned body tried.
    fenced: Mutex<Vec<FencedWrite>>,
    bodies: Mutex<HashMap<(CallId, Attempt), Going>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a body does when it reaches a point: go on, or (an abandoned body let go again) make
/// its late writes and return.
enum Next {
    On,
    Late,
}

impl Rig {
    pub(crate) fn new(script: &Script, ledger: Ledger) -> Arc<Self> {
        let steps = script
            .steps
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                let step = StepNo(u64::try_from(i).unwrap_or(u64::MAX).saturating_add(1));
                s.calls.iter().map(move |c| (c.id.clone(), step))
            })
            .collect();
        Arc::new(Rig {
            ledger,
            steps,
            schedule: Mutex::new(None),
            paused: Mutex::new(None),
            release: AtomicBool::new(false),
            waiting: Mutex::new(None),
            fenced: Mutex::new(Vec::new()),
            bodies: Mutex::new(HashMap::new()),
        })
    }

    /// Lends the rig the world's schedule while a step is driven.
    pub(crate) fn lend(&self, schedule: Schedule) {
        *lock(&self.schedule) = Some(schedule);
    }

    /// Hands the schedule back.
    pub(crate) fn take_back(&self) -> Option<Schedule> {
        lock(&self.schedule).take()
    }

    pub(crate) fn is_paused(&self) -> bool {
        lock(&self.paused).is_some()
    }

    pub(crate) fn take_paused(&self) -> Option<Paused> {
        lock(&self.paused).take()
    }

    /// Lets an abandoned body go on.
    pub(crate) fn release(&self) {
        self.release.store(true, Ordering::SeqCst);
        if let Some(waker) = lock(&self.waiting).take() {
            waker.wake();
        }
    }

    pub(crate) fn take_fenced(&self) -> Vec<FencedWrite> {
        std::mem::take(&mut *lock(&self.fenced))
    }

    fn step_of(&self, call: &CallId) -> StepNo {
        self.steps.get(call).copied().unwrap_or(StepNo(0))
    }

    fn started_in_ledger(&self, call: &CallId, attempt: Attempt) -> bool {
        self.ledger.entries().iter().any(|e| {
            matches!(e, LedgerEntry::BodyStarted { call: c, attempt: a, .. } if c == call && *a == attempt)
        })
    }

    /// A body's handler begins (a new body, or one re-attached to): its start is recorded
    /// unless the ledger has it (a re-attached body started nothing), and the armed body fault
    /// is drawn for it. `false` when this process had begun it already.
    fn began(&self, ctx: &CallCtx) -> bool {
        let key = (ctx.call().clone(), ctx.attempt());
        if lock(&self.bodies).contains_key(&key) {
            return false;
        }
        if !self.started_in_ledger(ctx.call(), ctx.attempt()) {
            self.ledger.record(LedgerEntry::BodyStarted {
                step: self.step_of(ctx.call()),
                call: ctx.call().clone(),
                dispatch: ctx.dispatch().clone(),
                attempt: ctx.attempt(),
            });
        }
        let fault_at = lock(&self.schedule).as_mut().and_then(Schedule::next_body);
        lock(&self.bodies).insert(key, Going { fault_at, ..Going::default() });
        true
    }

    fn going<R>(&self, ctx: &CallCtx, f: impl FnOnce(&mut Going) -> R) -> Option<R> {
        lock(&self.bodies).get_mut(&(ctx.call().clone(), ctx.attempt())).map(f)
    }

    /// The fault, if it fires at this point (`at`: a point number, or `None` for "just before
    /// the result", where a point past the last action fires).
    fn fires(&self, ctx: &CallCtx, at: Option<u32>) -> Option<BodyFault> {
        self.going(ctx, |g| match (g.fault_at, at) {
            (Some((point, fault)), Some(at)) if point == at => Some(fault),
            (Some((point, fault)), None) if point > g.actions => Some(fault),
            _ => None,
        })
        .flatten()
    }

    /// Checks the fault at point `at` (or just before the result): pauses there if it fires,
    /// until the simulation lets an abandoned body go on.
    async fn point(&self, ctx: &CallCtx, at: Option<u32>) -> Next {
        let Some(fault) = self.fires(ctx, at) else { return Next::On };
        self.going(ctx, |g| g.fault_at = None);
        // A body let go earlier does not let this one go: it waits for its own release.
        self.release.store(false, Ordering::SeqCst);
        *lock(&self.paused) =
            Some(Paused { fault, call: ctx.call().clone(), attempt: ctx.attempt() });
        Released { rig: self }.await;
        Next::Late
    }

    /// An action was taken: counted, and the fault checked after it.
    async fn acted(&self, ctx: &CallCtx) -> Next {
        let actions = self.going(ctx, |g| {
            g.actions = g.actions.saturating_add(1);
            g.actions
        });
        self.point(ctx, actions).await
    }

    fn effect(&self, ctx: &CallCtx, late: bool) {
        self.ledger.record(LedgerEntry::Effect {
            step: self.step_of(ctx.call()),
            call: ctx.call().clone(),
            dispatch: ctx.dispatch().clone(),
            attempt: ctx.attempt(),
            what: format!(
                "{} for {}{}",
                ctx.tool(),
                ctx.idempotency_key(),
                if late { " (late)" } else { "" }
            ),
            late,
        });
        self.going(ctx, |g| g.effect_done = true);
    }

    fn ended(&self, ctx: &CallCtx) {
        self.ledger.record(LedgerEntry::BodyEnded {
            step: self.step_of(ctx.call()),
            call: ctx.call().clone(),
            dispatch: ctx.dispatch().clone(),
            attempt: ctx.attempt(),
        });
    }

    /// An abandoned body goes on after the newer entry landed: its effect if it had not made it
    /// (a remote sub-agent's effects are its child's), then its output, which must be refused.
    async fn late(&self, ctx: &CallCtx, effects: bool) -> Result<Value, ToolError> {
        if effects && !self.going(ctx, |g| g.effect_done).unwrap_or(false) {
            self.effect(ctx, true);
        }
        let (call, attempt) = (ctx.call().clone(), ctx.attempt());
        let text = format!("late output of {call} attempt {attempt}");
        let written = ctx.output(text.clone()).await;
        lock(&self.fenced).push(FencedWrite {
            call: call.clone(),
            attempt,
            event: Event::OutputChunk(OutputChunk { call: call.clone(), attempt, text }),
            accepted: written.is_ok(),
        });
        Ok(late_output(&call))
    }
}

/// What an abandoned body returns as its (late) result.
pub(crate) fn late_output(call: &CallId) -> Value {
    json!({ "late": call.as_str() })
}

/// Pending until the rig releases the paused body.
struct Released<'a> {
    rig: &'a Rig,
}

impl Future for Released<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *lock(&self.rig.waiting) = Some(cx.waker().clone());
        if self.rig.release.load(Ordering::SeqCst) { Poll::Ready(()) } else { Poll::Pending }
    }
}

fn result(ctx: &CallCtx, child: Option<&SessionId>) -> Value {
    let mut value = json!({
        "tool": ctx.tool().as_str(),
        "dispatch": ctx.dispatch().as_str(),
        "attempt": ctx.attempt().get(),
    });
    if let (Some(child), Some(map)) = (child, value.as_object_mut()) {
        map.insert("child".to_owned(), child.as_str().into());
    }
    value
}

/// A body handler: one output chunk, then the effect; the fault points between.
async fn body(rig: Arc<Rig>, ctx: CallCtx) -> Result<Value, ToolError> {
    rig.began(&ctx);
    if let Next::Late = rig.point(&ctx, Some(0)).await {
        return rig.late(&ctx, true).await;
    }
    let text = format!("{} part 1 of attempt {};", ctx.tool(), ctx.attempt());
    ctx.output(text).await.map_err(ToolError::new)?;
    if let Next::Late = rig.acted(&ctx).await {
        return rig.late(&ctx, true).await;
    }
    rig.effect(&ctx, false);
    if let Next::Late = rig.acted(&ctx).await {
        return rig.late(&ctx, true).await;
    }
    if let Next::Late = rig.point(&ctx, None).await {
        return rig.late(&ctx, true).await;
    }
    rig.ended(&ctx);
    Ok(result(&ctx, None))
}

/// The remote sub-agent: its child is `child-of-<dispatch>`, started once per dispatch id.
struct Remote(Arc<Rig>);

impl RemoteAgent for Remote {
    fn start(&self, _args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>> {
        let rig = self.0.clone();
        Box::pin(async move {
            rig.began(&ctx);
            if let Next::Late = rig.point(&ctx, Some(0)).await {
                return Err(ToolError::new("abandoned before its child started"));
            }
            // The child's session as the (simulated) remote side names it.
            let child = SessionId::from_stored(format!("child-of-{}", ctx.dispatch()));
            rig.ledger.record(LedgerEntry::ChildStarted {
                step: rig.step_of(ctx.call()),
                call: ctx.call().clone(),
                dispatch: ctx.dispatch().clone(),
                child: child.clone(),
            });
            if let Next::Late = rig.acted(&ctx).await {
                return Err(ToolError::new("abandoned before its child was recorded"));
            }
            Ok(child)
        })
    }

    fn attach(&self, child: SessionId, ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>> {
        let rig = self.0.clone();
        Box::pin(async move {
            let output = |v: Value| RawJson::from_value(&v).map_err(ToolError::new);
            if rig.began(&ctx) {
                // Re-attached: the child was started by an earlier body.
                if let Next::Late = rig.point(&ctx, Some(0)).await {
                    return output(rig.late(&ctx, false).await?);
                }
            } else if let Next::Late = rig.acted(&ctx).await {
                // The child was recorded (`child_attached`): an action.
                return output(rig.late(&ctx, false).await?);
            }
            if let Next::Late = rig.point(&ctx, None).await {
                return output(rig.late(&ctx, false).await?);
            }
            rig.ended(&ctx);
            output(result(&ctx, Some(&child)))
        })
    }
}

/// A companion: its child is started as a remote sub-agent's, and re-entered as one is
/// re-attached to.
impl Companion for Remote {
    fn start(&self, args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>> {
        RemoteAgent::start(self, args, ctx)
    }

    fn reenter(&self, child: SessionId, ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>> {
        self.attach(child, ctx)
    }
}

/// The tool set as `Tools` for the executor: each tool with the kind the script calls it as.
pub(crate) fn tools_of(set: &ToolSet, script: &Script, rig: &Arc<Rig>) -> Tools {
    let mut kinds: HashMap<&str, CallKind> = HashMap::new();
    for call in script.steps.iter().flat_map(|s| &s.calls) {
        kinds.entry(call.tool.as_str()).or_insert(call.kind);
    }
    let mut tools = Tools::new();
    for (name, kind) in kinds {
        let Some(spec) = set.get(name) else { continue };
        let handler = {
            let rig = rig.clone();
            move |_: Value, ctx: CallCtx| body(rig.clone(), ctx)
        };
        tools = match kind {
            CallKind::Client => tools.client_tool(name, json!({})),
            CallKind::Approval => tools.approval_tool(name, json!({}), spec.replay, handler),
            CallKind::LocalAgent => tools.local_agent(name, json!({}), spec.replay, handler),
            CallKind::RemoteAgent => {
                tools.remote_agent(name, json!({}), spec.replay, Remote(rig.clone()))
            }
            CallKind::Companion => tools.companion(name, json!({}), Remote(rig.clone())),
            _ => tools.tool(name, json!({}), spec.replay, handler),
        };
    }
    tools
}
