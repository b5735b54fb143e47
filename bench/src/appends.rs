//! The append workload: `sessions` threads, each appending to its own session for a time
//! budget, with the latency of every append from the call to its acknowledgement; and the
//! events it appends, sized by their record bytes.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Limits, Message, Role, Seq, SessionId, Stamped, UnixMillis, record};

/// The event sizes of the append rows: record bytes (header, session id and payload), so that
/// a 256-byte event and the raw loop's 256-byte write carry the same bytes.
pub const SIZES: [usize; 2] = [256, 4096];

/// The session of thread `i` in round `round`; always 8 characters, so every event of one size
/// has the same record length.
pub fn session(round: usize, i: usize) -> SessionId {
    SessionId::new(format!("s{:03}-{:03}", round % 1000, i % 1000).as_str()).unwrap()
}

/// A user message whose record, in a session named by [`session`], is `bytes` long (or as near
/// below as the length prefix allows).
pub fn event(bytes: usize) -> Stamped {
    let at = UnixMillis(1_700_000_000_000);
    let make = |n: usize| Stamped::at(at, Message { role: Role::User, text: "x".repeat(n) });
    let len = |n: usize| record_len(&make(n)).unwrap_or(usize::MAX);
    let overhead = len(0);
    let mut n = bytes.saturating_sub(overhead);
    while n > 0 && len(n) > bytes {
        n -= 1;
    }
    make(n)
}

/// The record length of `event` in a session named by [`session`].
pub fn record_len(event: &Stamped) -> Option<usize> {
    let mut buf = Vec::new();
    record::encode_into(
        &mut buf,
        &session(0, 0),
        Seq(0),
        event.at,
        &event.event,
        &Limits::default(),
    )
    .ok()
}

/// What an append carries.
#[derive(Debug, Clone, Copy)]
pub struct Work {
    pub events: u64,
    pub bytes: u64,
}

/// What one or more runs of a workload measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Appends acknowledged.
    pub appends: u64,
    /// Events acknowledged.
    pub events: u64,
    /// Record bytes acknowledged.
    pub bytes: u64,
    pub elapsed: Duration,
    /// Latency per append, nanoseconds.
    pub latency: Histogram<u64>,
}

impl Measured {
    pub fn empty() -> Result<Measured, String> {
        Ok(Measured {
            appends: 0,
            events: 0,
            bytes: 0,
            elapsed: Duration::ZERO,
            latency: Histogram::new(3).map_err(|e| e.to_string())?,
        })
    }

    /// Adds another run's figures to these (slices of one workload taken in turns).
    pub fn merge(&mut self, other: &Measured) -> Result<(), String> {
        self.appends += other.appends;
        self.events += other.events;
        self.bytes += other.bytes;
        self.elapsed += other.elapsed;
        self.latency.add(&other.latency).map_err(|e| e.to_string())
    }

    fn secs(&self) -> f64 {
        self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    pub fn appends_per_sec(&self) -> f64 {
        self.appends as f64 / self.secs()
    }

    pub fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.secs()
    }

    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.secs()
    }
}

/// Runs `sessions` threads for `budget`; thread `i` makes its appender with `make(i)` (not
/// timed) and calls it in a loop, each call one append carrying `work`.
pub fn measure<F, A>(
    sessions: usize,
    budget: Duration,
    work: Work,
    make: F,
) -> Result<Measured, String>
where
    F: Fn(usize) -> Result<A, String> + Sync,
    A: FnMut() -> Result<(), String>,
{
    let barrier = Barrier::new(sessions + 1);
    let (per_thread, elapsed) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..sessions)
            .map(|i| {
                let (barrier, make) = (&barrier, &make);
                scope.spawn(move || -> Result<(u64, Histogram<u64>), String> {
                    let made = make(i);
                    // Every thread reaches the barrier, even one that failed, so none waits forever.
                    barrier.wait();
                    let mut append = made?;
                    let mut hist = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
                    let mut appends = 0u64;
                    let until = Instant::now() + budget;
                    while Instant::now() < until {
                        let t = Instant::now();
                        append()?;
                        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        hist.record(ns.max(1)).map_err(|e| e.to_string())?;
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
    let mut m = Measured::empty()?;
    for r in per_thread {
        let (n, h) = r.map_err(|_| "an appender thread panicked".to_owned())??;
        m.appends += n;
        m.latency.add(&h).map_err(|e| e.to_string())?;
    }
    m.events = m.appends * work.events;
    m.bytes = m.appends * work.bytes;
    m.elapsed = elapsed;
    Ok(m)
}

/// The workload on a journal store: thread `i` appends `events` to [`session`]`(round, i)`
/// (which must be empty) at the tail it holds, a compare-and-set as a session writer does.
pub fn on_store(
    store: &dyn JournalStore,
    round: usize,
    sessions: usize,
    events: &[Stamped],
    durability: Durability,
    budget: Duration,
) -> Result<Measured, String> {
    let bytes: usize = events.iter().filter_map(record_len).sum();
    let work = Work { events: events.len() as u64, bytes: bytes as u64 };
    measure(sessions, budget, work, |i| {
        let s = session(round, i);
        let mut next = Seq(0);
        Ok(move || {
            let ack = store
                .append(&s, next, events, durability)
                .map_err(|e| format!("append to {s} at {next}: {e}"))?;
            next = ack.next;
            Ok(())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_have_the_record_length_asked_for() {
        for bytes in SIZES {
            assert_eq!(record_len(&event(bytes)), Some(bytes));
        }
    }

    #[test]
    fn the_workload_appends_dense_logs_and_counts_them() {
        let store = stepjournal_backends::memory::MemoryStore::new();
        let events = [event(256), event(256)];
        let m = on_store(&store, 3, 2, &events, Durability::Synced, Duration::from_millis(20))
            .map_err(|e| e.to_string());
        let m = m.unwrap_or_else(|e| panic!("{e}"));
        assert!(m.appends > 0);
        assert_eq!(m.events, 2 * m.appends);
        assert_eq!(m.bytes, 512 * m.appends);
        assert_eq!(m.latency.len(), m.appends);
        let stored: u64 = (0..2).map(|i| store.tail(&session(3, i)).map_or(0, |t| t.get())).sum();
        assert_eq!(stored, m.events);
    }
}
