//! The append workload: `sessions` threads, each appending to its own session at the tail it
//! holds (a compare-and-set, as a session writer does), for a time budget, with per-append
//! latency from the call to its acknowledgement.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Message, Role, Seq, SessionId, Stamped, UnixMillis};

/// The event every append row writes: a message with 256 bytes of text.
pub fn event() -> Stamped {
    Stamped::at(UnixMillis(1_700_000_000_000), Message { role: Role::User, text: "x".repeat(256) })
}

/// What one run of the workload measured.
#[derive(Debug)]
pub struct Measured {
    /// Appends acknowledged.
    pub appends: u64,
    /// Events acknowledged.
    pub events: u64,
    pub elapsed: Duration,
    /// Latency per append, nanoseconds.
    pub latency: Histogram<u64>,
}

impl Measured {
    pub fn appends_per_sec(&self) -> f64 {
        self.appends as f64 / self.elapsed.as_secs_f64()
    }

    pub fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64()
    }

    pub fn p50_us(&self) -> f64 {
        self.latency.value_at_quantile(0.5) as f64 / 1000.0
    }

    pub fn p99_us(&self) -> f64 {
        self.latency.value_at_quantile(0.99) as f64 / 1000.0
    }
}

/// Runs the workload on `store` (sessions named `{prefix}-{i}`, which must be empty), each
/// append holding `batch` events.
pub fn measure(
    store: &dyn JournalStore,
    prefix: &str,
    sessions: usize,
    batch: usize,
    durability: Durability,
    budget: Duration,
) -> Result<Measured, String> {
    let barrier = Barrier::new(sessions + 1);
    let events: Vec<Stamped> = (0..batch).map(|_| event()).collect();
    let (per_thread, elapsed) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..sessions)
            .map(|i| {
                let (barrier, events) = (&barrier, &events);
                scope.spawn(move || -> Result<(u64, Histogram<u64>), String> {
                    let s = SessionId::from(format!("{prefix}-{i}").as_str());
                    let mut hist = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
                    let mut next = Seq(0);
                    let mut appends = 0u64;
                    barrier.wait();
                    let until = Instant::now() + budget;
                    while Instant::now() < until {
                        let t = Instant::now();
                        let ack = store
                            .append(&s, next, events, durability)
                            .map_err(|e| format!("append to {s} at {next}: {e}"))?;
                        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        hist.record(ns.max(1)).map_err(|e| e.to_string())?;
                        next = ack.next;
                        appends += 1;
                    }
                    Ok((appends, hist))
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        (results, start.elapsed())
    });
    let mut latency = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let mut appends = 0;
    for r in per_thread {
        let (n, h) = r.map_err(|_| "an appender thread panicked".to_owned())??;
        appends += n;
        latency.add(&h).map_err(|e| e.to_string())?;
    }
    Ok(Measured { appends, events: appends * batch as u64, elapsed, latency })
}
