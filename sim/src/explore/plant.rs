//! Deliberate bugs, one at a time, to show that the explorer catches them: each lives in a
//! wrapper the explorer drives (the writer's settings, the store, the medium) or, for the rules
//! themselves, behind the `plant` feature of the `recovery` crate (never in a normal build).

use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::sync::Arc;

use stepjournal_backends::memory::MemoryStore;
use stepjournal_backends::{
    AppendAck, AppendError, Durability, JournalStore, OpenError, StoreError,
};
use stepjournal_codec::{Record, Seq, SessionId, Stamped};

use crate::Medium;

/// A deliberate bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Plant {
    /// The order rule forgets the sequential chain (planner and writer; `plant` feature).
    OrderIgnoresSequential,
    /// The writer is given `max_bodies` one higher than the checks hold it to.
    MaxBodiesOffByOne,
    /// The store ignores the position an append expects, so a fenced body's result lands.
    FencedResultAccepted,
    /// Recovery re-runs a call saved unsafe whose tool is safe now (`plant` feature).
    UnsafeRerun,
    /// A crash loses the last record of the session, acknowledged or not.
    LostAcknowledgedAppend,
    /// A start-up's wake does not compare the head it listed (`plant` feature; actors).
    ClaimIgnoresHead,
    /// Leases are judged by the actor's clock, not the store's (actors).
    LeaseByActorClock,
    /// A decision is not compared with the tail its decider read (`plant` feature; actors).
    DecisionIgnoresTail,
    /// A future dropped while its append could land leaves its run open, unaware (`plant`
    /// feature; actors).
    DroppedAppendUnseen,
    /// A stop is written over a run that ended completed (`plant` feature; actors).
    StopOverEnded,
}

impl Plant {
    /// Every plant.
    pub const ALL: [Plant; 10] = [
        Plant::OrderIgnoresSequential,
        Plant::MaxBodiesOffByOne,
        Plant::FencedResultAccepted,
        Plant::UnsafeRerun,
        Plant::LostAcknowledgedAppend,
        Plant::ClaimIgnoresHead,
        Plant::LeaseByActorClock,
        Plant::DecisionIgnoresTail,
        Plant::DroppedAppendUnseen,
        Plant::StopOverEnded,
    ];

    /// The plants the actor search is for (the others are the one-actor search's).
    pub const ACTORS: [Plant; 5] = [
        Plant::ClaimIgnoresHead,
        Plant::LeaseByActorClock,
        Plant::DecisionIgnoresTail,
        Plant::DroppedAppendUnseen,
        Plant::StopOverEnded,
    ];

    /// The plant's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Plant::OrderIgnoresSequential => "order-ignores-sequential",
            Plant::MaxBodiesOffByOne => "max-bodies-off-by-one",
            Plant::FencedResultAccepted => "fenced-result-accepted",
            Plant::UnsafeRerun => "unsafe-rerun",
            Plant::LostAcknowledgedAppend => "lost-acknowledged-append",
            Plant::ClaimIgnoresHead => "claim-ignores-head",
            Plant::LeaseByActorClock => "lease-by-actor-clock",
            Plant::DecisionIgnoresTail => "decision-ignores-tail",
            Plant::DroppedAppendUnseen => "dropped-append-unseen",
            Plant::StopOverEnded => "stop-over-ended",
        }
    }

    /// The bug in the rules this plant switches on, if it is one (`plant` feature).
    #[cfg(feature = "plant")]
    pub(crate) fn in_rules(self) -> Option<stepjournal_recovery::plant::RulePlant> {
        use stepjournal_recovery::plant::RulePlant as P;
        match self {
            Plant::OrderIgnoresSequential => Some(P::OrderIgnoresSequential),
            Plant::UnsafeRerun => Some(P::UnsafeRerun),
            Plant::ClaimIgnoresHead => Some(P::ClaimIgnoresHead),
            Plant::DecisionIgnoresTail => Some(P::DecisionIgnoresTail),
            Plant::DroppedAppendUnseen => Some(P::DroppedAppendUnseen),
            Plant::StopOverEnded => Some(P::StopOverEnded),
            _ => None,
        }
    }

    /// Whether the plant needs the `plant` feature (it changes the rules themselves).
    pub fn needs_feature(self) -> bool {
        matches!(
            self,
            Plant::OrderIgnoresSequential
                | Plant::UnsafeRerun
                | Plant::ClaimIgnoresHead
                | Plant::DecisionIgnoresTail
                | Plant::DroppedAppendUnseen
                | Plant::StopOverEnded
        )
    }
}

impl fmt::Display for Plant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Plant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Plant::ALL.into_iter().find(|p| p.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Plant::ALL.iter().map(|p| p.as_str()).collect();
            format!("`{s}` is not a plant; the plants are {}", names.join(", "))
        })
    }
}

/// Switches the plant's rule or writer bug on for this thread while it lives.
pub(crate) struct Planted;

impl Planted {
    /// Switches `plant` on; refused (the plant handed back) when it needs the `plant` feature
    /// this build has not.
    pub(crate) fn new(plant: Option<Plant>) -> Result<Self, Plant> {
        if let Some(plant) = plant
            && plant.needs_feature()
        {
            #[cfg(feature = "plant")]
            stepjournal_recovery::plant::set(plant.in_rules());
            #[cfg(not(feature = "plant"))]
            return Err(plant);
        }
        Ok(Planted)
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        #[cfg(feature = "plant")]
        stepjournal_recovery::plant::set(None);
    }
}

/// The memory store the explorer runs on, with the store plants.
#[derive(Debug)]
pub(crate) struct PlantMedium {
    store: Arc<MemoryStore>,
    plant: Option<Plant>,
}

impl PlantMedium {
    pub(crate) fn new(plant: Option<Plant>) -> Self {
        PlantMedium { store: Arc::new(MemoryStore::new()), plant }
    }
}

impl Medium for PlantMedium {
    fn name(&self) -> String {
        match self.plant {
            Some(plant) => format!("memory (planted: {plant})"),
            None => "memory".to_owned(),
        }
    }

    fn open(&mut self) -> Result<Arc<dyn JournalStore>, OpenError> {
        Ok(match self.plant {
            Some(Plant::FencedResultAccepted) => Arc::new(Unfenced(self.store.clone())),
            _ => self.store.clone(),
        })
    }

    fn crash(&mut self, _seed: u64) {
        if self.plant != Some(Plant::LostAcknowledgedAppend) {
            return;
        }
        let old = std::mem::take(&mut self.store);
        let Ok(sessions) = old.sessions() else { return };
        for session in sessions {
            let Ok(mut log) = old.read_all(&session) else { continue };
            log.pop();
            let stamped: Vec<Stamped> =
                log.into_iter().map(|r| Stamped::at(r.at, r.event)).collect();
            if !stamped.is_empty() {
                let _kept =
                    self.store.append(&session, Seq(0), &stamped, self.store.max_durability());
            }
        }
    }
}

/// A store that appends at its tail whatever position the writer expects, and answers as if
/// the batch went where it was expected: the check that fences a stale writer is gone.
struct Unfenced(Arc<MemoryStore>);

impl JournalStore for Unfenced {
    fn max_durability(&self) -> Durability {
        self.0.max_durability()
    }

    fn append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        let tail = self.0.tail(session)?;
        let ack = self.0.append(session, tail, events, durability)?;
        Ok(AppendAck { first: expected, next: expected.add(events.len() as u64), ..ack })
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        self.0.read(session, range)
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        self.0.tail(session)
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        self.0.sessions()
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        self.0.delete(session)
    }
}
