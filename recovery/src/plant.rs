//! Deliberate bugs a search can switch on, to show that it catches them. Compiled only with the
//! `plant` feature, which no normal build enables; even then each is off until [`set`] switches
//! it on for the calling thread.

use std::cell::Cell;

/// A deliberate bug in the rules (the explorer's own list, `stepjournal_sim::explore::Plant`,
/// switches these on among others).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RulePlant {
    /// The order rule forgets the sequential chain: the planner and the writer's `start_body`
    /// treat sequential calls as if they were in no lane.
    OrderIgnoresSequential,
    /// Recovery reads only the tool's current policy: a call saved unsafe whose tool is safe
    /// now runs again.
    UnsafeRerun,
}

thread_local! {
    static ACTIVE: Cell<Option<RulePlant>> = const { Cell::new(None) };
}

/// Switches `plant` on for this thread (`None`: every plant off).
pub fn set(plant: Option<RulePlant>) {
    ACTIVE.with(|a| a.set(plant));
}

/// Whether `plant` is on for this thread.
pub fn active(plant: RulePlant) -> bool {
    ACTIVE.with(|a| a.get() == Some(plant))
}
