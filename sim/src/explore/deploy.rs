//! The registry recovery reads across a deploy: the tools as the model saw them until the first
//! fault, and as they are after it (a policy changed, a tool removed, a schema the saved
//! arguments fail).

use std::sync::atomic::{AtomicBool, Ordering};

use stepjournal_codec::{RawJson, Replay, ToolName};
use stepjournal_recovery::{ArgsCheck, MemoryRegistry, ToolRegistry};

/// Two registries and a switch between them.
#[derive(Debug)]
pub(crate) struct Deploy {
    before: MemoryRegistry,
    after: MemoryRegistry,
    /// Set once the first fault fired; never cleared.
    deployed: AtomicBool,
}

impl Deploy {
    pub(crate) fn new(before: MemoryRegistry, after: MemoryRegistry) -> Self {
        Deploy { before, after, deployed: AtomicBool::new(false) }
    }

    /// From now on the registry is the one after the deploy.
    pub(crate) fn deploy(&self) {
        self.deployed.store(true, Ordering::Relaxed);
    }

    /// The registry as it is after the deploy.
    pub(crate) fn after(&self) -> &MemoryRegistry {
        &self.after
    }

    fn now(&self) -> &MemoryRegistry {
        if self.deployed.load(Ordering::Relaxed) { &self.after } else { &self.before }
    }
}

impl ToolRegistry for Deploy {
    fn policy(&self, tool: &ToolName) -> Option<Replay> {
        self.now().policy(tool)
    }

    fn check_args(&self, tool: &ToolName, args: &RawJson) -> ArgsCheck {
        self.now().check_args(tool, args)
    }
}
