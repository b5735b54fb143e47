//! SQLite rows of the side-by-side table, and the append workload every backend's rows use.
//!
//! The workload: `sessions` threads, each appending one event at a time to its own session at
//! the tail it holds (a compare-and-set, as a session writer does), at one durability level,
//! for a time budget. Each event is a `message` with 256 bytes of text. Latency is measured
//! per append, from the call to its acknowledgement.

use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Message, Role, Seq, SessionId, Stamped, UnixMillis};

/// One measured row.
#[derive(Debug, Clone)]
pub struct Row {
    /// The backend's name.
    pub backend: &'static str,
    /// The durability each append asked for.
    pub durability: Durability,
    /// Concurrent sessions, one writer thread each.
    pub sessions: usize,
    /// Appends acknowledged.
    pub appends: u64,
    /// Appends acknowledged per second, over all sessions.
    pub per_sec: f64,
    /// Median append latency, microseconds.
    pub p50_us: u64,
    /// 99th-percentile append latency, microseconds.
    pub p99_us: u64,
}

/// The workloads of a backend's rows: (durability, concurrent sessions).
pub const WORKLOADS: [(Durability, usize); 4] = [
    (Durability::Synced, 1),
    (Durability::Synced, 16),
    (Durability::Buffered, 1),
    (Durability::Buffered, 16),
];

/// The workload's event: a message with 256 bytes of text.
pub fn event() -> Stamped {
    Stamped::at(
        UnixMillis(1_700_000_000_000),
        Message {
            role: Role::User,
            text: "x".repeat(256),
        },
    )
}

/// Runs the append workload on `store` for about `budget` and measures it. Sessions are named
/// `{prefix}-{i}` and must be empty.
pub fn measure_appends(
    backend: &'static str,
    store: &dyn JournalStore,
    prefix: &str,
    sessions: usize,
    durability: Durability,
    budget: Duration,
) -> Result<Row, String> {
    let barrier = Barrier::new(sessions);
    let started = Instant::now();
    let per_thread: Vec<Result<Histogram<u64>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..sessions)
            .map(|i| {
                let barrier = &barrier;
                scope.spawn(move || {
                    let s = SessionId::from(format!("{prefix}-{i}").as_str());
                    let batch = [event()];
                    let mut hist = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
                    let mut next = Seq(0);
                    barrier.wait();
                    let until = Instant::now() + budget;
                    while Instant::now() < until {
                        let t = Instant::now();
                        let ack = store
                            .append(&s, next, &batch, durability)
                            .map_err(|e| format!("{backend}: append to {s} at {next}: {e}"))?;
                        let us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
                        hist.record(us.max(1)).map_err(|e| e.to_string())?;
                        next = ack.next;
                    }
                    Ok(hist)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a writer thread panicked".to_owned()))
            })
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut all = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for h in per_thread {
        all.add(h?).map_err(|e| e.to_string())?;
    }
    let appends = all.len();
    Ok(Row {
        backend,
        durability,
        sessions,
        appends,
        per_sec: appends as f64 / elapsed,
        p50_us: all.value_at_quantile(0.5),
        p99_us: all.value_at_quantile(0.99),
    })
}

/// The SQLite rows: each workload on a fresh database file in `dir`.
pub fn rows(dir: &Path, budget: Duration) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (i, (durability, sessions)) in WORKLOADS.into_iter().enumerate() {
        let path = dir.join(format!("bench-{i}.sqlite"));
        let store = SqliteStore::open(&path, SqliteOptions::default())
            .map_err(|e| format!("sqlite: {e}"))?;
        rows.push(measure_appends(
            "sqlite", &store, "bench", sessions, durability, budget,
        )?);
    }
    Ok(rows)
}
