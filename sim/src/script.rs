//! The scripted model: what the model asks for, step after step.

use stepjournal_codec::{CallId, CallKind, RawJson, ToolName};

/// A scripted session: the user's opening message, then the model's replies in order.
///
/// Reply `k` (from 0) opens step `k + 1`. The model is scripted: whatever happened to the
/// calls of one step (results, pairings, a redirect), its next reply is the next one here. A
/// session ends once every reply was committed and its step closed, or when it is stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// The message that opens the session's first turn.
    pub message: String,
    /// The model's replies, in order.
    pub steps: Vec<ScriptStep>,
}

impl Script {
    /// A script opened by `message`, with no replies yet.
    pub fn new(message: impl Into<String>) -> Self {
        Script { message: message.into(), steps: Vec::new() }
    }

    /// The script with one more reply.
    pub fn step(mut self, step: ScriptStep) -> Self {
        self.steps.push(step);
        self
    }

    /// The call `id` of the script, with the index of its reply.
    pub fn call(&self, id: &CallId) -> Option<(usize, &ScriptCall)> {
        self.steps
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.calls.iter().find(|c| &c.id == id).map(|c| (i, c)))
    }

    /// The first call id the script uses twice, if any. The simulator needs every call id to
    /// be unique across the session, so that its ledger names each call without ambiguity.
    pub fn repeated_call(&self) -> Option<&CallId> {
        let mut seen = std::collections::HashSet::new();
        self.steps.iter().flat_map(|s| &s.calls).map(|c| &c.id).find(|id| !seen.insert(*id))
    }
}

/// One reply of the scripted model: its text and its calls.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScriptStep {
    /// The reply's text.
    pub text: String,
    /// The calls, in the order the model gave them.
    pub calls: Vec<ScriptCall>,
}

impl ScriptStep {
    /// A reply with this text and no calls yet.
    pub fn new(text: impl Into<String>) -> Self {
        ScriptStep { text: text.into(), calls: Vec::new() }
    }

    /// The reply with one more call.
    pub fn call(mut self, call: ScriptCall) -> Self {
        self.calls.push(call);
        self
    }
}

/// One call of a scripted reply. Its replay policy is the tool's in the
/// [`ToolSet`](super::ToolSet) (the policy the tool had when the model called it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptCall {
    /// The call's id: unique across the whole script.
    pub id: CallId,
    /// The tool it names.
    pub tool: ToolName,
    /// Its kind.
    pub kind: CallKind,
    /// Its arguments.
    pub args: RawJson,
    /// Its concurrency group.
    pub group: Option<String>,
    /// Whether it is part of the reply's sequential chain.
    pub sequential: bool,
    /// For an `approval` call: whether the approver grants it. Ignored for other kinds.
    pub approve: bool,
}

impl ScriptCall {
    /// A `tool` call of `tool` with empty arguments, no group, not sequential.
    pub fn tool(id: impl Into<CallId>, tool: impl Into<ToolName>) -> Self {
        ScriptCall {
            id: id.into(),
            tool: tool.into(),
            kind: CallKind::Tool,
            args: RawJson::empty_object(),
            group: None,
            sequential: false,
            approve: true,
        }
    }

    /// The call with another kind.
    pub fn kind(mut self, kind: CallKind) -> Self {
        self.kind = kind;
        self
    }

    /// The call in concurrency group `group`.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// The call in the reply's sequential chain.
    pub fn sequential(mut self) -> Self {
        self.sequential = true;
        self
    }

    /// The call with these arguments.
    pub fn args(mut self, args: RawJson) -> Self {
        self.args = args;
        self
    }

    /// For an `approval` call: the approver denies it.
    pub fn denied(mut self) -> Self {
        self.approve = false;
        self
    }
}
