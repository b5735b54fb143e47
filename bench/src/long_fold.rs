//! The fold of one long session from its newest snapshot, in memory: a session of 1,000,000
//! events (the fold row's log: tool steps of 3 calls, a new run every 50 steps) with a
//! `snapshot` after every 32nd step commit, as a run writes them by default. Timed:
//! `SessionState::from_snapshot` of the newest snapshot and the fold of the events after it,
//! beside `fold` of the whole log, in turns; each state dropped inside its figure.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use stepjournal::JournalOptions;
use stepjournal::recovery::{SessionState, fold};
use stepjournal_codec::{Event, Seq, Snapshot};

use crate::args::WorkDir;
use crate::table::{Compare, Latency, Row, Section, Table, fmt_us};
use crate::turns::order;

/// The fold row's log of at least `events` events, with a snapshot after every `every`-th step
/// commit since the last one (each the fold of the log before it).
pub fn log_with_snapshots(events: usize, every: usize) -> Vec<Event> {
    let plain = crate::fold::long_log(events);
    let mut log = Vec::with_capacity(plain.len() + plain.len() / 100);
    let mut state = SessionState::default();
    for event in plain {
        let commit = matches!(event, Event::StepCommit(_));
        state.apply(&event);
        log.push(event);
        if commit
            && state.commits_since_snapshot() >= every
            && let Some(snapshot) = state.snapshot()
        {
            let event = Event::Snapshot(Box::new(snapshot));
            state.apply(&event);
            log.push(event);
        }
    }
    log
}

/// The newest snapshot of `log` and where it is.
pub fn newest_snapshot(log: &[Event]) -> Option<(usize, &Snapshot)> {
    log.iter().enumerate().rev().find_map(|(i, e)| match e {
        Event::Snapshot(s) => Some((i, &**s)),
        _ => None,
    })
}

/// The state from the snapshot at `at` and the events after it.
pub fn fold_from(log: &[Event], at: usize, snapshot: &Snapshot) -> Result<SessionState, String> {
    let mut state = SessionState::from_snapshot(Seq(at as u64), snapshot)?;
    for e in log.iter().skip(at + 1) {
        state.apply(e);
    }
    Ok(state)
}

fn timed(f: impl FnOnce() -> Result<SessionState, String>) -> Result<Duration, String> {
    let t = Instant::now();
    let state = f()?;
    drop(std::hint::black_box(state));
    Ok(t.elapsed())
}

fn record(hist: &mut Histogram<u64>, d: Duration) -> Result<(), String> {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
    hist.record(ns).map_err(|e| e.to_string())
}

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let (events, passes) = work.fold_events();
    let passes = passes.max(3);
    let every = JournalOptions::DEFAULT_SNAPSHOT_EVERY as usize;
    let log = log_with_snapshots(events, every);
    let (at, snapshot) = newest_snapshot(&log).ok_or("the long log has no snapshot")?;
    let suffix = log.len() - at - 1;
    let mut from = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let mut full = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for round in 0..passes {
        for j in order(2, round) {
            if j == 0 {
                record(&mut from, timed(|| fold_from(&log, at, snapshot))?)?;
            } else {
                record(&mut full, timed(|| Ok(fold(&log)))?)?;
            }
        }
    }
    let n = log.len();
    let p50 = |h: &Histogram<u64>| h.value_at_quantile(0.5) as f64 / 1000.0;
    let scaled = if work.quick && n < 1_000_000 {
        format!("; --quick on a debug build: {n} events, not 1,000,000")
    } else {
        String::new()
    };
    for (key, hist, what) in [
        (
            "long.fold.snapshot",
            &from,
            format!(
                "SessionState::from_snapshot + fold of the {suffix} events after it, a session \
                 of {n} events, 1 thread"
            ),
        ),
        ("long.fold.full", &full, format!("fold of the whole session of {n} events, 1 thread")),
    ] {
        let secs = hist.mean() * hist.len() as f64 / 1e9;
        let mut row = Row::new(
            Section::Long,
            key,
            "recovery",
            what,
            hist.len() as f64 / secs.max(f64::MIN_POSITIVE),
            "folds/s",
            secs,
        )
        .latency(Latency::of(hist));
        let mut note = format!(
            "in memory; a snapshot after every {every} step commits (the writer's default), \
             the newest at event {at}; the state dropped inside the figure; {passes} turns{scaled}"
        );
        if key == "long.fold.snapshot" {
            row = row.vs("full fold", Compare::to("long.fold.full"));
            note = format!(
                "p50 {} (target < 10 ms), {:.4}x the full fold's {}; {note}",
                fmt_us(p50(hist)),
                p50(hist) / p50(&full).max(f64::MIN_POSITIVE),
                fmt_us(p50(&full))
            );
        }
        table.push(row.note(note));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::{registry, wake};
    use stepjournal::recovery::{Config, plan, verify};

    #[test]
    fn a_fold_from_the_newest_snapshot_plans_a_wake_as_the_full_fold_does() {
        let log = log_with_snapshots(5_000, 32);
        let findings = verify(&log);
        assert!(findings.is_empty(), "{findings:?}");
        let (at, snapshot) = newest_snapshot(&log).unwrap_or_else(|| panic!("no snapshot"));
        assert!(log.len() - at < 32 * 16, "the suffix is {} events", log.len() - at);
        let from = fold_from(&log, at, snapshot).unwrap_or_default();
        let config = Config::default();
        let full = plan(&fold(&log), &wake(), &registry(), &config);
        assert_eq!(plan(&from, &wake(), &registry(), &config), full);
    }
}
