//! A tool call as the model's reply names it.

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Deserialize, Serialize, Serializer};

use crate::{CallId, RawJson, ToolName};

/// Who executes a call and how recovery treats it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A server-side body.
    #[default]
    Tool,
    /// Executed by the client; the client's answer settles it.
    Client,
    /// A server body that waits for an approval first.
    Approval,
    /// A remote sub-agent, started once under the call's dispatch id.
    RemoteAgent,
    /// An in-process child agent: it dies with its parent.
    LocalAgent,
    /// A persistent companion child.
    Companion,
}

impl CallKind {
    /// The kind's name in the JSON form.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Tool => "tool",
            CallKind::Client => "client",
            CallKind::Approval => "approval",
            CallKind::RemoteAgent => "remote_agent",
            CallKind::LocalAgent => "local_agent",
            CallKind::Companion => "companion",
        }
    }
}

/// A tool's replay policy: may a body run again after a crash?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Replay {
    /// Two attempts, even overlapping, leave the same result as one.
    Safe,
    /// The default: never run again; answered "outcome unknown".
    #[default]
    Unsafe,
}

impl Replay {
    /// The policy's name in the JSON form.
    pub fn as_str(self) -> &'static str {
        match self {
            Replay::Safe => "safe",
            Replay::Unsafe => "unsafe",
        }
    }
}

/// One call of a reply. JSON defaults (FORMAT.md): `args` `{}`, `kind` `tool`, `replay` `unsafe`,
/// `group` none, `sequential` false.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Call {
    /// The call's id, unique within its reply.
    pub call: CallId,
    /// The tool the model called.
    pub tool: ToolName,
    /// The arguments, as the JSON text they arrived as.
    #[serde(default)]
    pub args: RawJson,
    /// Who executes it.
    #[serde(default)]
    pub kind: CallKind,
    /// The policy the tool had when the model called it.
    #[serde(default)]
    pub replay: Replay,
    /// The call's concurrency group: calls of one group run in reply order.
    #[serde(default)]
    pub group: Option<String>,
    /// Part of the reply's sequential chain.
    #[serde(default)]
    pub sequential: bool,
}

impl Call {
    /// A call of `tool` with these arguments, as the model made it: kind `tool`, replay
    /// `unsafe` (FORMAT.md's defaults), no group, not sequential. A writer that knows the tools
    /// (the `stepjournal` crate's `Tools`) sets the kind and the policy from its registry when
    /// the reply is made; [`in_group`](Self::in_group) and [`in_sequence`](Self::in_sequence)
    /// place it.
    pub fn new(call: impl Into<CallId>, tool: impl Into<ToolName>, args: RawJson) -> Self {
        Call {
            call: call.into(),
            tool: tool.into(),
            args,
            kind: CallKind::default(),
            replay: Replay::default(),
            group: None,
            sequential: false,
        }
    }

    /// The call in the concurrency group `group`.
    pub fn in_group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// The call in the reply's sequential chain.
    pub fn in_sequence(mut self) -> Self {
        self.sequential = true;
        self
    }
}

impl Serialize for Call {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            // The JSON form leaves out a group the call does not have.
            let len = 6 + usize::from(self.group.is_some());
            let mut map = serializer.serialize_map(Some(len))?;
            map.serialize_entry("call", &self.call)?;
            map.serialize_entry("tool", &self.tool)?;
            map.serialize_entry("args", &self.args)?;
            map.serialize_entry("kind", &self.kind)?;
            map.serialize_entry("replay", &self.replay)?;
            if let Some(group) = &self.group {
                map.serialize_entry("group", group)?;
            }
            map.serialize_entry("sequential", &self.sequential)?;
            map.end()
        } else {
            // The binary form is positional: every field, in declaration order.
            let mut st = serializer.serialize_struct("Call", 7)?;
            st.serialize_field("call", &self.call)?;
            st.serialize_field("tool", &self.tool)?;
            st.serialize_field("args", &self.args)?;
            st.serialize_field("kind", &self.kind)?;
            st.serialize_field("replay", &self.replay)?;
            st.serialize_field("group", &self.group)?;
            st.serialize_field("sequential", &self.sequential)?;
            st.end()
        }
    }
}
