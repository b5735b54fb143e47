//! What the simulation keeps across its runs when the tool executor (`Step::drive`) runs its
//! steps: the rig its handlers report to, the tools, and a step an abandoned run left driving.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use stepjournal::{DriveError, StepOutcome, Tools};

use super::drive_tools::{Paused, Rig, tools_of};
use super::flow::World;
use super::script::Script;
use super::tools::ToolSet;

/// A driven step's future, owning what it borrows.
pub(crate) type Driving = Pin<Box<dyn Future<Output = Result<StepOutcome, DriveError>> + Send>>;

/// A step whose run was abandoned with a body paused in it: driven on once the newer entry
/// landed.
pub(crate) struct Late {
    pub(crate) driving: Driving,
    pub(crate) paused: Paused,
}

/// What running the steps through the executor needs across the runs.
pub(crate) struct Executor {
    pub(crate) rig: Arc<Rig>,
    pub(crate) tools: Tools,
    pub(crate) late: Option<Late>,
}

impl Executor {
    pub(crate) fn new(script: &Script, set: &ToolSet, world: &World<'_>) -> Self {
        let rig = Rig::new(script, world.ledger.clone());
        let tools = tools_of(set, script, &rig);
        Executor { rig, tools, late: None }
    }

    /// The call and attempt of the body an abandoned step left paused, if any.
    pub(crate) fn late_body_of(&self) -> Option<(stepjournal_codec::CallId, u32)> {
        self.late.as_ref().map(|l| (l.paused.call.clone(), l.paused.attempt.get()))
    }
}
