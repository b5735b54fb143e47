//! The figures an SQL store counts as it works, read as [`StoreMetrics`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::head::StoreMetrics;

/// Counters, each only growing (`max_group` only rising).
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    appends: AtomicU64,
    groups: AtomicU64,
    max_group: AtomicU64,
    syncs: AtomicU64,
    sync_micros: AtomicU64,
    bytes: AtomicU64,
    leases_taken_over: AtomicU64,
}

impl Metrics {
    /// A committed group (one transaction, or one statement) of `size` appends, `landed` of which
    /// landed with `bytes` of records; `synced` when its commit waited for durable storage,
    /// which took `took`.
    pub(crate) fn group(
        &self,
        size: usize,
        landed: usize,
        bytes: u64,
        synced: bool,
        took: Duration,
    ) {
        let size = size as u64;
        self.groups.fetch_add(1, Ordering::Relaxed);
        self.max_group.fetch_max(size, Ordering::Relaxed);
        self.appends.fetch_add(landed as u64, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if synced {
            self.syncs.fetch_add(1, Ordering::Relaxed);
            let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
            self.sync_micros.fetch_add(micros, Ordering::Relaxed);
        }
    }

    /// A live lease of another owner replaced by a forced take.
    pub(crate) fn took_over(&self) {
        self.leases_taken_over.fetch_add(1, Ordering::Relaxed);
    }

    /// The figures now; `poisoned` as the store says.
    pub(crate) fn snapshot(&self, poisoned: bool) -> StoreMetrics {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StoreMetrics {
            appends: get(&self.appends),
            groups: get(&self.groups),
            max_group: get(&self.max_group),
            syncs: get(&self.syncs),
            sync_micros: get(&self.sync_micros),
            bytes: get(&self.bytes),
            poisoned: u64::from(poisoned),
            leases_taken_over: get(&self.leases_taken_over),
            reclaim_failures: 0,
        }
    }
}
