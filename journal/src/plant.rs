//! Whether a deliberate bug of the writer is switched on for this thread: never without the
//! `plant` feature (no normal build has it), and even with it only while the explorer's search
//! switches one on (`stepjournal_recovery::plant::set`).

/// A deliberate bug of the writer, as the explorer names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriterPlant {
    ClaimIgnoresHead,
    DecisionIgnoresTail,
    DroppedAppendUnseen,
    StopOverEnded,
}

/// Whether `plant` is on for this thread.
#[cfg(feature = "plant")]
pub(crate) fn active(plant: WriterPlant) -> bool {
    use stepjournal_recovery::plant::{RulePlant, active};
    active(match plant {
        WriterPlant::ClaimIgnoresHead => RulePlant::ClaimIgnoresHead,
        WriterPlant::DecisionIgnoresTail => RulePlant::DecisionIgnoresTail,
        WriterPlant::DroppedAppendUnseen => RulePlant::DroppedAppendUnseen,
        WriterPlant::StopOverEnded => RulePlant::StopOverEnded,
    })
}

/// Whether `plant` is on for this thread: never, without the `plant` feature.
#[cfg(not(feature = "plant"))]
pub(crate) fn active(_plant: WriterPlant) -> bool {
    false
}
