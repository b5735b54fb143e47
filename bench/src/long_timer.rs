//! The executor's timer lateness while long sessions wake: on a current-thread tokio runtime,
//! a task ticking a 1 ms interval records how late each tick ran while `begin_run_async(Wake)`
//! of many long sessions (2,000 steps, 4 KiB results, snapshots by the default policy) runs
//! beside it; in turns with the same wakes of as many 10-step sessions and with the timer
//! alone, the store reopened (untimed) before each.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use stepjournal::{Journal, JournalOptions};
use stepjournal_codec::{Entry, SessionId};
use tokio::time::MissedTickBehavior;

use crate::args::WorkDir;
use crate::long_session::{Grown, Shelf};
use crate::table::{Compare, Latency, Row, Section, Table, fmt_us};
use crate::turns::order;

/// The steps of the short sessions woken as the baseline.
const SHORT: u64 = 10;
/// How long the timer runs in a turn at least (alone: exactly), the wakes at its start.
const IDLE: Duration = Duration::from_millis(100);

/// What one contender measured over its turns.
struct Seen {
    /// Each tick's lateness, nanoseconds.
    late: Histogram<u64>,
    worst: Duration,
    /// Sessions woken and the time the wakes took.
    woken: u64,
    secs: f64,
    /// The time the timer ran.
    window: f64,
}

/// Runs the 1 ms timer on a fresh current-thread runtime for [`IDLE`], or while `sessions`
/// wake if that takes longer; the wakes begin at its start.
fn turn(journal: &Journal, sessions: &[SessionId], seen: &mut Seen) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let (late, secs, runs) = rt.block_on(async {
        let timer = tokio::spawn(async move {
            let mut interval = tokio::time::interval(Duration::from_millis(1));
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            interval.tick().await;
            let mut late = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let due = interval.tick().await;
                late.push(tokio::time::Instant::now().saturating_duration_since(due));
            }
            late
        });
        // The timer's first tick is due before the wakes begin.
        tokio::task::yield_now().await;
        let t = Instant::now();
        let wakes: Vec<_> = sessions
            .iter()
            .map(|s| {
                let (journal, s) = (journal.clone(), s.clone());
                tokio::spawn(async move { journal.begin_run_async(&s, Entry::Wake).await })
            })
            .collect();
        let mut runs = Vec::with_capacity(wakes.len());
        for w in wakes {
            runs.push(
                w.await.map_err(|e| e.to_string()).and_then(|r| r.map_err(|e| e.to_string())),
            );
        }
        let secs = t.elapsed().as_secs_f64();
        // Every turn's timer runs at least as long as one alone, the wakes at its start.
        tokio::time::sleep(IDLE.saturating_sub(t.elapsed())).await;
        stop.store(true, Ordering::Relaxed);
        let late = timer.await.map_err(|e| e.to_string());
        (late, (secs, t.elapsed().as_secs_f64()), runs)
    });
    for run in runs {
        drop(run?);
    }
    for d in late? {
        seen.worst = seen.worst.max(d);
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
        seen.late.record(ns).map_err(|e| e.to_string())?;
    }
    seen.woken += sessions.len() as u64;
    seen.secs += secs.0;
    seen.window += secs.1;
    Ok(())
}

/// Grows `n` sessions named `prefix-i` to `steps` steps each, on two threads.
fn grow(journal: &Journal, prefix: &str, n: usize, steps: u64) -> Result<Vec<SessionId>, String> {
    let mut sessions: Vec<Grown> =
        (0..n).map(|i| Grown::new(&format!("{prefix}-{i}"))).collect::<Result<_, _>>()?;
    let half = n.div_ceil(2).max(1);
    std::thread::scope(|scope| -> Result<(), String> {
        let handles: Vec<_> = sessions
            .chunks_mut(half)
            .map(|part| {
                scope.spawn(move || -> Result<(), String> {
                    for s in part {
                        s.grow(journal, steps, steps, None)?;
                        s.drop_run();
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "a growing thread panicked".to_owned())??;
        }
        Ok(())
    })?;
    Ok(sessions.into_iter().map(|s| s.session).collect())
}

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("long-timer")?;
    let (n, steps) = work.long_timer_sessions();
    let rounds = work.long_rounds();
    let mut shelf = Shelf::new(&dir, JournalOptions::DEFAULT_SNAPSHOT_EVERY)?;
    let long = grow(shelf.journal()?, "long", n, steps)?;
    let short = grow(shelf.journal()?, "short", n, SHORT)?;
    let contenders: [(&str, &[SessionId]); 3] = [("long", &long), ("short", &short), ("idle", &[])];
    let mut seen = Vec::new();
    for _ in &contenders {
        let late = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
        seen.push(Seen { late, worst: Duration::ZERO, woken: 0, secs: 0.0, window: 0.0 });
    }
    for round in 0..rounds {
        for j in order(contenders.len(), round) {
            let (Some((_, sessions)), Some(seen)) = (contenders.get(j), seen.get_mut(j)) else {
                continue;
            };
            let journal = shelf.reopen()?;
            turn(journal, sessions, seen)?;
        }
    }
    drop(shelf);
    work.clear(&dir);
    let idle_worst = seen.get(2).map_or(Duration::ZERO, |s| s.worst);
    for ((name, sessions), s) in contenders.iter().zip(&seen) {
        let ms = IDLE.as_millis();
        let what = match *name {
            "long" => format!("while {n} sessions of {steps} steps wake"),
            "short" => format!("while {n} sessions of {SHORT} steps wake"),
            _ => format!("alone, {ms} ms a turn"),
        };
        let (rate, unit, secs) = if sessions.is_empty() {
            (s.late.len() as f64 / s.window.max(f64::MIN_POSITIVE), "ticks/s", s.window)
        } else {
            (s.woken as f64 / s.secs.max(f64::MIN_POSITIVE), "wakes/s", s.secs)
        };
        let how = if sessions.is_empty() {
            String::new()
        } else {
            format!(" (begin_run_async(Wake), all at once at the start of a turn of >= {ms} ms)")
        };
        let mut row = Row::new(
            Section::Long,
            format!("long.timer.{name}"),
            "tokio",
            format!("1 ms timer's lateness on a current-thread runtime {what}{how}"),
            rate,
            unit,
            secs,
        )
        .latency(Latency::of(&s.late))
        .note(format!(
            "worst lateness {} (target < 5 ms; the timer alone: {}); latency: each tick's \
             lateness past its deadline ({} ticks; tokio's timer wheel has 1 ms slots); file \
             backend, snapshots every {} steps, 4 KiB results, the store reopened (untimed) \
             before each turn, warm page cache; {rounds} turns, the order shuffled every round",
            fmt_us(s.worst.as_secs_f64() * 1e6),
            fmt_us(idle_worst.as_secs_f64() * 1e6),
            s.late.len(),
            JournalOptions::DEFAULT_SNAPSHOT_EVERY
        ));
        if *name == "long" {
            row = row.vs("10-step sessions", Compare::to("long.timer.short"));
        }
        table.push(row);
    }
    Ok(())
}
