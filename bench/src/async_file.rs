//! The file backend's async appends in the synced group: `sessions` tasks on one
//! current-thread tokio runtime (how a single-threaded runtime, Node's or an async service's
//! worker, drives them), each awaiting `append_async` to its own session at the tail it holds.
//! Beside the rate and latency, the context switches of every thread of the process per append:
//! the handoffs an append costs (the task to the committer and back is two).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use stepjournal_backends::file::FileStore;
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Seq, Stamped};

use crate::appends::{Measured, event, record_len, session};
use crate::switches::Switches;
use crate::turns::Contender;

/// The key of the async file row of a synced group.
pub fn key(bytes: usize, sessions: usize) -> String {
    format!("file.async.{bytes}.{sessions}")
}

/// The contender: its store, its runtime, and the switches it counted.
pub fn contender(dir: &Path, bytes: usize, sessions: usize) -> Result<Contender, String> {
    let store = Arc::new(crate::file::open(&dir.join("file-async"))?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| format!("a current-thread tokio runtime: {e}"))?;
    let event = event(bytes);
    // The switches counted over the slices, and the appends they were counted over.
    let counted = Arc::new(Mutex::new((Switches::default(), 0u64)));
    let seen = Arc::clone(&counted);
    let note = format!(
        "append_async from {sessions} task(s) on one current-thread tokio runtime, group commit"
    );
    let contender = Contender::new(
        "file async",
        key(bytes, sessions),
        String::new(),
        &note,
        Box::new(move |round, budget| {
            let before_syncs = store.stats().syncs;
            let before = Switches::now();
            let m = runtime.block_on(tasks(&store, round, sessions, &event, budget))?;
            if let (Some(before), Some(after)) = (before, Switches::now()) {
                let d = after.since(before);
                let mut c = counted.lock().map_err(|_| "the switch counter was poisoned")?;
                c.0.voluntary += d.voluntary;
                c.0.involuntary += d.involuntary;
                c.1 += m.appends;
            }
            Ok((m, Some(store.stats().syncs - before_syncs)))
        }),
    );
    Ok(contender.remark(Box::new(move || {
        let (switches, appends) = *seen.lock().ok()?;
        (appends > 0).then(|| {
            let per = |n: u64| n as f64 / appends as f64;
            format!(
                "{:.2} voluntary + {:.2} involuntary context switches per append (every thread)",
                per(switches.voluntary),
                per(switches.involuntary)
            )
        })
    })))
}

/// `sessions` tasks appending for `budget`, each to its own session of round `round`.
async fn tasks(
    store: &Arc<FileStore>,
    round: usize,
    sessions: usize,
    event: &Stamped,
    budget: Duration,
) -> Result<Measured, String> {
    let bytes = record_len(event).unwrap_or(0) as u64;
    let start = Instant::now();
    let until = start + budget;
    let handles: Vec<_> = (0..sessions)
        .map(|i| {
            let (store, event) = (Arc::clone(store), event.clone());
            tokio::spawn(async move {
                let s = session(round, i);
                let events = std::slice::from_ref(&event);
                let mut next = Seq(0);
                let mut hist = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
                let mut appends = 0u64;
                while Instant::now() < until {
                    let t = Instant::now();
                    let ack = store
                        .append_async(&s, next, events, Durability::Synced)
                        .await
                        .map_err(|e| format!("append_async to {s} at {next}: {e}"))?;
                    next = ack.next;
                    let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    hist.record(ns.max(1)).map_err(|e| e.to_string())?;
                    appends += 1;
                }
                Ok::<_, String>((appends, hist))
            })
        })
        .collect();
    let mut m = Measured::empty()?;
    for h in handles {
        let (appends, hist) = h.await.map_err(|e| format!("an appending task failed: {e}"))??;
        m.appends += appends;
        m.latency.add(&hist).map_err(|e| e.to_string())?;
    }
    m.events = m.appends;
    m.bytes = m.appends * bytes;
    m.elapsed = start.elapsed();
    Ok(m)
}
