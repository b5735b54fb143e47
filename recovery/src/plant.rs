//! Deliberate bugs a search can switch on, to show that it catches them. Compiled only with the
//! `plant` feature, which no normal build enables; even then each is off until [`set`] switches
//! it on for the calling thread.

use std::cell::Cell;

/// A deliberate bug in the rules or in the writer that applies them (the explorer's own list,
/// `stepjournal_sim::explore::Plant`, switches these on among others). The writer's read
/// through `stepjournal`'s `plant` feature, which forwards to this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RulePlant {
    /// The order rule forgets the sequential chain: the planner and the writer's `start_body`
    /// treat sequential calls as if they were in no lane.
    OrderIgnoresSequential,
    /// Recovery reads only the tool's current policy: a call saved unsafe whose tool is safe
    /// now runs again.
    UnsafeRerun,
    /// A start-up's wake (`recover_all`) is not made at the tail its session was listed at:
    /// the claim does not compare the head it listed.
    ClaimIgnoresHead,
    /// An answer or an approval decision is appended wherever the log ends, not only at the
    /// tail its decider read.
    DecisionIgnoresTail,
    /// A future of a run dropped while its batch could be landing leaves the run open, as if
    /// nothing had been handed to the store.
    DroppedAppendUnseen,
    /// A stop is written over a run that already ended completed, failed or stopped.
    StopOverEnded,
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
