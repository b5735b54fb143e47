//! Where the writer's ids come from: run ids, dispatch ids and checkpoint ids.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use stepjournal_codec::{CheckpointId, DispatchId, RunId};

/// A source of the ids the writer mints outside the fold (recovery stays pure: the new run's id
/// and the checkpoints come in from here).
///
/// Every id one source returns must differ from every id it returned before, and from every id
/// any other source writing the same sessions returns: a dispatch id is the dedupe key an
/// external effect is keyed on, so two calls must never share one. [`UniqueIds`] keeps that
/// across processes and restarts; [`SequentialIds`] only within itself (tests and simulators,
/// which share one source across the runs they drive).
pub trait IdSource: Send + Sync + fmt::Debug {
    /// A new run's id (`run_started`).
    fn run_id(&self) -> RunId;
    /// A new dispatch id (`dispatch_minted`): a call's dedupe key, the same on every attempt.
    fn dispatch_id(&self) -> DispatchId;
    /// A new checkpoint id: a reply's append checkpoint or a step's commit checkpoint.
    fn checkpoint_id(&self) -> CheckpointId;
}

/// The default [`IdSource`]: ids unique across processes, machines and restarts.
///
/// Each id is `{kind}-{tag}-{n}`: `kind` is `run`, `d` or `cp`; `tag` is 16 hex digits drawn once
/// per source from the operating system's randomness (through the standard library's hasher
/// keys) mixed with the clock and the process id; `n` counts up from 1 within the source.
#[derive(Debug)]
pub struct UniqueIds {
    tag: String,
    next: AtomicU64,
}

impl UniqueIds {
    /// A source with a fresh random tag.
    pub fn new() -> Self {
        let mut hasher = RandomState::new().build_hasher();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        hasher.write_u128(nanos);
        hasher.write_u32(std::process::id());
        UniqueIds { tag: format!("{:016x}", hasher.finish()), next: AtomicU64::new(1) }
    }

    fn mint(&self, kind: &str) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{kind}-{}-{n}", self.tag)
    }
}

impl Default for UniqueIds {
    fn default() -> Self {
        Self::new()
    }
}

impl IdSource for UniqueIds {
    fn run_id(&self) -> RunId {
        RunId::new(self.mint("run"))
    }
    fn dispatch_id(&self) -> DispatchId {
        DispatchId::new(self.mint("d"))
    }
    fn checkpoint_id(&self) -> CheckpointId {
        CheckpointId::new(self.mint("cp"))
    }
}

/// A deterministic [`IdSource`] for tests and simulators: `run-1`, `run-2`, ...; `d-1`, `d-2`,
/// ...; `cp-1`, `cp-2`, ..., each kind counted on its own, with an optional prefix
/// (`{prefix}-run-1`).
///
/// Unique only within one source: share one (`Arc`) across every journal that writes the same
/// sessions, including the one that recovers after a simulated crash.
#[derive(Debug, Default)]
pub struct SequentialIds {
    prefix: String,
    runs: AtomicU64,
    dispatches: AtomicU64,
    checkpoints: AtomicU64,
}

impl SequentialIds {
    /// A source with no prefix, every count at 0 (the first id of each kind ends in `-1`).
    pub fn new() -> Self {
        Self::default()
    }

    /// A source whose ids begin with `prefix-`.
    pub fn with_prefix(prefix: impl Into<String>) -> Self {
        SequentialIds { prefix: prefix.into(), ..Self::default() }
    }

    fn mint(&self, kind: &str, counter: &AtomicU64) -> String {
        let n = counter.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if self.prefix.is_empty() {
            format!("{kind}-{n}")
        } else {
            format!("{}-{kind}-{n}", self.prefix)
        }
    }
}

impl IdSource for SequentialIds {
    fn run_id(&self) -> RunId {
        RunId::new(self.mint("run", &self.runs))
    }
    fn dispatch_id(&self) -> DispatchId {
        DispatchId::new(self.mint("d", &self.dispatches))
    }
    fn checkpoint_id(&self) -> CheckpointId {
        CheckpointId::new(self.mint("cp", &self.checkpoints))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_count_each_kind_from_one() {
        let ids = SequentialIds::new();
        assert_eq!(ids.run_id().as_str(), "run-1");
        assert_eq!(ids.dispatch_id().as_str(), "d-1");
        assert_eq!(ids.dispatch_id().as_str(), "d-2");
        assert_eq!(ids.checkpoint_id().as_str(), "cp-1");
        assert_eq!(SequentialIds::with_prefix("a").run_id().as_str(), "a-run-1");
    }

    #[test]
    fn two_unique_sources_never_mint_the_same_id() {
        let (a, b) = (UniqueIds::new(), UniqueIds::new());
        assert_ne!(a.tag, b.tag);
        let first = a.dispatch_id();
        assert_ne!(first, a.dispatch_id());
        assert_ne!(first, b.dispatch_id());
    }
}
