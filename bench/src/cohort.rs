//! The ideal cohort: the best one sync at a time can do for `N` appenders. `N` threads on one raw
//! preallocated file meet at a barrier; one of them writes all `N` records with one `write` and
//! one `fdatasync`; all of them go on when it returned, and meet again. Every group holds every
//! appender, no group waits for a straggler, and nothing but the write and the sync is done, so
//! a group committer's appends/s over this row's is how close it comes to its design's bound.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::appends::Measured;
use crate::raw::FsyncLoop;
use crate::turns::Contender;

/// The key of the ideal cohort row of `threads` appenders of `bytes`-byte records.
pub fn key(bytes: usize, threads: usize) -> String {
    format!("raw.cohort.{bytes}.{threads}")
}

/// The ideal cohort of `threads` appenders of `bytes`-byte records, as a contender in their
/// synced group.
pub fn contender(dir: &Path, bytes: usize, threads: usize) -> Result<Contender, String> {
    let path = dir.join(format!("cohort-{bytes}-{threads}"));
    let group = Mutex::new(FsyncLoop::create(&path, bytes, threads.max(1), true)?);
    let workload = if threads == 1 {
        format!("ideal cohort, {bytes}-byte records, preallocated, 1 thread: one write + fdatasync")
    } else {
        format!(
            "ideal cohort, {bytes}-byte records, preallocated, {threads} threads: a barrier, then \
             one write + fdatasync of all {threads} records"
        )
    };
    Ok(Contender::new(
        "raw",
        key(bytes, threads),
        workload,
        "the bound of one sync at a time: every group holds every appender; latency per append \
         (one round)",
        Box::new(move |_round, budget| {
            let syncs = || group.lock().map_or(0, |g| g.syncs);
            let before = syncs();
            let m = rounds(&group, threads.max(1), bytes, budget)?;
            Ok((m, Some(syncs() - before)))
        }),
    ))
}

/// Runs rounds for `budget`: each of `threads` threads times its round from its arrival at the
/// barrier to the end of the group's sync.
fn rounds(
    group: &Mutex<FsyncLoop>,
    threads: usize,
    bytes: usize,
    budget: Duration,
) -> Result<Measured, String> {
    let go = Barrier::new(threads + 1);
    let arrive = Barrier::new(threads);
    let synced = Barrier::new(threads);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let (per_thread, elapsed) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (go, arrive, synced, stop, failure) = (&go, &arrive, &synced, &stop, &failure);
                scope.spawn(move || -> Result<(u64, Histogram<u64>), String> {
                    let hist = Histogram::<u64>::new(3).map_err(|e| e.to_string());
                    // Every thread reaches the barrier, even one that failed, so none waits forever.
                    go.wait();
                    let mut hist = hist?;
                    let until = Instant::now() + budget;
                    let mut appends = 0u64;
                    loop {
                        let t = Instant::now();
                        if arrive.wait().is_leader() {
                            let written = match group.lock() {
                                Ok(mut g) => g.once(),
                                Err(_) => Err("the group's file lock is poisoned".to_owned()),
                            };
                            if let Err(e) = written {
                                if let Ok(mut f) = failure.lock() {
                                    f.get_or_insert(e);
                                }
                                stop.store(true, Ordering::Relaxed);
                            } else if Instant::now() >= until {
                                stop.store(true, Ordering::Relaxed);
                            }
                        }
                        // The leader's stop is seen by all: the barrier orders it before.
                        synced.wait();
                        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        hist.record(ns.max(1)).map_err(|e| e.to_string())?;
                        appends += 1;
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    Ok((appends, hist))
                })
            })
            .collect();
        go.wait();
        let start = Instant::now();
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        (results, start.elapsed())
    });
    if let Some(e) = failure.lock().ok().and_then(|mut f| f.take()) {
        return Err(e);
    }
    let mut m = Measured::empty()?;
    for r in per_thread {
        let (n, h) = r.map_err(|_| "a cohort thread panicked".to_owned())??;
        m.appends += n;
        m.latency.add(&h).map_err(|e| e.to_string())?;
    }
    m.events = m.appends;
    m.bytes = m.appends * bytes as u64;
    m.elapsed = elapsed;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_is_one_sync_for_all_threads() {
        let dir = std::env::temp_dir().join(format!("sj-cohort-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let group = Mutex::new(
            FsyncLoop::create(&dir.join("c"), 64, 4, true).unwrap_or_else(|e| panic!("{e}")),
        );
        let m = rounds(&group, 4, 64, Duration::from_millis(20)).unwrap_or_else(|e| panic!("{e}"));
        let syncs = group.lock().map_or(0, |g| g.syncs);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(m.appends > 0 && m.appends.is_multiple_of(4), "{} appends", m.appends);
        // One sync per round of 4 appends, and one for the megabyte of zeros preallocated when
        // the file was made (the rounds' 64-byte records did not use it up).
        assert!(m.bytes < 1 << 20);
        assert_eq!(syncs, m.appends / 4 + 1);
        assert_eq!(m.bytes, 64 * m.appends);
    }
}
