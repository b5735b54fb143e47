//! The simulated tools: their policies, and bodies whose external effects go to the ledger.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use stepjournal_codec::{
    Attempt, CallId, CallKind, DispatchId, RawJson, Replay, SessionId, StepNo,
};
use stepjournal_recovery::MemoryRegistry;

use super::ledger::{Ledger, LedgerEntry};
use super::script::ScriptCall;
use stepjournal::WriteError;
use stepjournal::{Body, Step};

/// A tool's body, as the simulator runs it: it performs its external effects through
/// [`BodyRun::effect`] (recorded in the ledger), commits output through [`BodyRun::chunk`], and
/// returns its result.
///
/// Every [`BodyRun`] method is a point where the simulator may inject a fault (a crash, the run
/// abandoned, the run failed); it then returns [`Interrupted`], which the tool must hand back
/// at once (`?`): the body is gone. A runtime plugs its own tools in here, with their external
/// side replaced by ledger records, to see what its tools do under crashes.
pub trait SimTool: Send + Sync + fmt::Debug {
    /// Runs one body of a call.
    fn run(&self, body: &mut BodyRun<'_>) -> Result<ToolOutput, Interrupted>;
}

/// What a body returns: its result (`tool_result`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The result.
    pub output: RawJson,
    /// Whether the tool reported an error.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(output: RawJson) -> Self {
        ToolOutput { output, is_error: false }
    }
}

/// Why a body stopped before its result: a fault the simulator injected, or a write the
/// journal refused. Hand it back from [`SimTool::run`] unchanged.
#[derive(Debug)]
pub struct Interrupted {
    pub(crate) cause: Cause,
}

#[derive(Debug)]
pub(crate) enum Cause {
    /// The simulator's fault fired at this point.
    Fault,
    /// An append of the body failed.
    Write(WriteError),
}

impl Interrupted {
    /// Whether the simulator injected a fault here (else a write of the body failed).
    pub fn is_fault(&self) -> bool {
        matches!(self.cause, Cause::Fault)
    }
}

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            Cause::Fault => f.write_str("the simulator injected a fault inside the body"),
            Cause::Write(e) => write!(f, "a write of the body failed: {e}"),
        }
    }
}

impl std::error::Error for Interrupted {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            Cause::Fault => None,
            Cause::Write(e) => Some(e),
        }
    }
}

/// One running body, as a [`SimTool`] sees it: the call, its dispatch id and attempt, and the
/// ways to act on the outside world and on the journal.
#[derive(Debug)]
pub struct BodyRun<'a> {
    pub(crate) body: &'a Body,
    pub(crate) step: &'a Step,
    pub(crate) ledger: &'a Ledger,
    pub(crate) call: &'a ScriptCall,
    /// The child already bound to the call (a re-attach), if any.
    pub(crate) child: Option<SessionId>,
    /// The action after which the fault fires (0: before the tool runs; past the last action:
    /// just before the result).
    pub(crate) fault_at: Option<u32>,
    /// Actions taken so far (effects, chunks, child starts and attachments).
    pub(crate) actions: u32,
    /// Effects performed so far.
    pub(crate) effects: u32,
}

impl<'a> BodyRun<'a> {
    /// The call.
    pub fn call(&self) -> &CallId {
        &self.call.id
    }

    /// The call's kind.
    pub fn kind(&self) -> CallKind {
        self.call.kind
    }

    /// The call's tool.
    pub fn tool(&self) -> &str {
        self.call.tool.as_str()
    }

    /// The call's arguments.
    pub fn args(&self) -> &RawJson {
        &self.call.args
    }

    /// The step of the call's reply.
    pub fn step(&self) -> StepNo {
        self.step.number()
    }

    /// The call's dispatch id: key every external effect on it.
    pub fn dispatch(&self) -> &DispatchId {
        self.body.dispatch()
    }

    /// This body's attempt.
    pub fn attempt(&self) -> Attempt {
        self.body.attempt()
    }

    /// The idempotency key (`session:dispatch`).
    pub fn idempotency_key(&self) -> &str {
        self.body.idempotency_key()
    }

    /// Performs an external effect: recorded in the ledger under the call's dispatch id and this
    /// attempt. A fault may fire right after it.
    pub fn effect(&mut self, what: impl Into<String>) -> Result<(), Interrupted> {
        self.ledger.record(LedgerEntry::Effect {
            step: self.step(),
            call: self.call.id.clone(),
            dispatch: self.dispatch().clone(),
            attempt: self.attempt(),
            what: what.into(),
            late: false,
        });
        self.effects = self.effects.saturating_add(1);
        self.acted()
    }

    /// Commits output (`output_chunk`). A fault may fire right after it.
    pub fn chunk(&mut self, text: impl Into<String>) -> Result<(), Interrupted> {
        self.body.output_chunk(text).map_err(|e| Interrupted { cause: Cause::Write(e) })?;
        self.acted()
    }

    /// For a remote sub-agent call: the call's child. A child already attached is re-attached
    /// to; otherwise the remote side is asked to start one keyed on the dispatch id (ledger),
    /// and the journal binds it to the call (`child_attached`). A fault may fire after each.
    pub fn start_child(&mut self) -> Result<SessionId, Interrupted> {
        if let Some(child) = &self.child {
            return Ok(child.clone());
        }
        // The child's session as the (simulated) remote side names it.
        let child = SessionId::from_stored(format!("child-of-{}", self.dispatch()));
        self.ledger.record(LedgerEntry::ChildStarted {
            step: self.step(),
            call: self.call.id.clone(),
            dispatch: self.dispatch().clone(),
            child: child.clone(),
        });
        self.acted()?;
        self.step
            .child_attached(&self.call.id, child.clone())
            .map_err(|e| Interrupted { cause: Cause::Write(e) })?;
        self.child = Some(child.clone());
        self.acted()?;
        Ok(child)
    }

    /// Checks the fault point before the tool runs.
    pub(crate) fn before(&self) -> Result<(), Interrupted> {
        if self.fault_at == Some(0) { Err(Interrupted { cause: Cause::Fault }) } else { Ok(()) }
    }

    /// Checks the fault point just before the result: a point past the tool's last action
    /// fires here.
    pub(crate) fn before_result(&self) -> Result<(), Interrupted> {
        match self.fault_at {
            Some(at) if at > self.actions => Err(Interrupted { cause: Cause::Fault }),
            _ => Ok(()),
        }
    }

    fn acted(&mut self) -> Result<(), Interrupted> {
        self.actions = self.actions.saturating_add(1);
        if self.fault_at == Some(self.actions) {
            return Err(Interrupted { cause: Cause::Fault });
        }
        Ok(())
    }
}

/// The simulator's default tool: one external effect per body (recorded in the ledger), and
/// `chunks` output chunks, the effect after the first. For a `remote_agent` call it starts (or
/// re-attaches to) the call's child instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerTool {
    /// How many output chunks a body commits.
    pub chunks: u8,
}

impl Default for LedgerTool {
    /// One chunk.
    fn default() -> Self {
        LedgerTool { chunks: 1 }
    }
}

impl SimTool for LedgerTool {
    fn run(&self, body: &mut BodyRun<'_>) -> Result<ToolOutput, Interrupted> {
        if super::check::has_child(body.kind()) {
            let child = body.start_child()?;
            return Ok(ToolOutput::ok(result_of(body, Some(&child))));
        }
        let what = format!("{} for {}", body.tool(), body.idempotency_key());
        let mut effect_done = false;
        for i in 0..self.chunks {
            body.chunk(format!("{} part {} of attempt {};", body.tool(), i + 1, body.attempt()))?;
            if !effect_done {
                body.effect(what.clone())?;
                effect_done = true;
            }
        }
        if !effect_done {
            body.effect(what)?;
        }
        Ok(ToolOutput::ok(result_of(body, None)))
    }
}

/// The [`LedgerTool`]'s result: the tool, the dispatch id, the attempt (and the child).
fn result_of(body: &BodyRun<'_>, child: Option<&SessionId>) -> RawJson {
    let mut value = serde_json::json!({
        "tool": body.tool(),
        "dispatch": body.dispatch().as_str(),
        "attempt": body.attempt().get(),
    });
    if let (Some(child), Some(map)) = (child, value.as_object_mut()) {
        map.insert("child".to_owned(), child.as_str().into());
    }
    RawJson::from_value(&value).unwrap_or_else(|_| RawJson::null())
}

/// A tool the simulator knows: its replay policy (now, and when the model called it) and its
/// body.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The tool's policy.
    pub replay: Replay,
    /// What a body of it does.
    pub behaviour: Arc<dyn SimTool>,
}

/// The simulated tools by name: the registry recovery reads, and each tool's body.
#[derive(Debug, Clone, Default)]
pub struct ToolSet {
    tools: BTreeMap<String, ToolSpec>,
}

impl ToolSet {
    /// No tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// The set with `name` added, as a [`LedgerTool`] with one chunk.
    pub fn tool(self, name: impl Into<String>, replay: Replay) -> Self {
        self.with(name, replay, LedgerTool::default())
    }

    /// The set with `name` added, its bodies run by `behaviour`.
    pub fn with(
        mut self,
        name: impl Into<String>,
        replay: Replay,
        behaviour: impl SimTool + 'static,
    ) -> Self {
        self.tools.insert(name.into(), ToolSpec { replay, behaviour: Arc::new(behaviour) });
        self
    }

    /// The tool `name`.
    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name)
    }

    /// The registry recovery reads: every tool present with its policy, any arguments passing.
    pub fn registry(&self) -> MemoryRegistry {
        self.tools
            .iter()
            .fold(MemoryRegistry::new(), |r, (name, spec)| r.with_tool(name.as_str(), spec.replay))
    }
}
