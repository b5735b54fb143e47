//! The tool registry as it is now: each tool's current replay policy and an argument check.

use std::collections::HashMap;

use stepjournal_codec::{RawJson, Replay, ToolName};

/// The outcome of checking a call's saved arguments against its tool's current input schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgsCheck {
    /// The arguments pass.
    Pass,
    /// The arguments fail; the reason is shown in the explain trail.
    Fail {
        /// Why they fail (or why they could not be checked).
        reason: String,
    },
}

impl ArgsCheck {
    /// Whether the arguments pass.
    pub fn passes(&self) -> bool {
        matches!(self, ArgsCheck::Pass)
    }
}

/// The registry recovery reads: what each tool is *now*.
///
/// Recovery checks the policy twice (the call's saved policy and the tool's current one; both
/// must say safe) and re-validates the saved arguments, so that a deploy between a crash and its
/// recovery can only make recovery more careful.
pub trait ToolRegistry {
    /// The tool's current replay policy, or `None` when the tool has been removed.
    fn policy(&self, tool: &ToolName) -> Option<Replay>;

    /// Checks a call's saved arguments against the tool's current input schema. Only asked for a
    /// tool whose [`policy`](Self::policy) is `Some`. An implementation that cannot check (a
    /// schema that does not compile) answers [`ArgsCheck::Fail`]: the careful side.
    fn check_args(&self, tool: &ToolName, args: &RawJson) -> ArgsCheck;
}

/// A registry held in memory, with no schemas: for tests, simulations and embedders that check
/// arguments elsewhere. Each tool has a policy and either accepts any arguments or rejects all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryRegistry {
    tools: HashMap<ToolName, (Replay, Option<String>)>,
}

impl MemoryRegistry {
    /// An empty registry: every tool is removed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a tool that accepts any arguments.
    pub fn with_tool(mut self, tool: impl Into<ToolName>, replay: Replay) -> Self {
        self.tools.insert(tool.into(), (replay, None));
        self
    }

    /// Adds (or replaces) a tool whose current schema every saved argument fails, for `reason`.
    pub fn with_rejecting_tool(
        mut self,
        tool: impl Into<ToolName>,
        replay: Replay,
        reason: impl Into<String>,
    ) -> Self {
        self.tools.insert(tool.into(), (replay, Some(reason.into())));
        self
    }
}

impl ToolRegistry for MemoryRegistry {
    fn policy(&self, tool: &ToolName) -> Option<Replay> {
        self.tools.get(tool).map(|(replay, _)| *replay)
    }

    fn check_args(&self, tool: &ToolName, _args: &RawJson) -> ArgsCheck {
        match self.tools.get(tool) {
            Some((_, None)) => ArgsCheck::Pass,
            Some((_, Some(reason))) => ArgsCheck::Fail { reason: reason.clone() },
            None => ArgsCheck::Fail { reason: format!("tool `{tool}` is not in the registry") },
        }
    }
}
