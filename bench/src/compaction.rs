//! A bystander's appends while a compaction runs: one thread appends `Synced` 256-byte events to
//! its session while, a quarter into the slice, a delete makes a sealed segment 80% dead (its
//! batches interleaved 4:1 with a kept session's), so that the segment is reclaimed by copying
//! the kept fifth. Beside it, in the same turns, the same bystander while a delete reclaims
//! nothing (a session with one batch in the active segment). Each slice runs on a journal of its
//! own, prepared untimed: one sealed segment and the active one. A slice with compaction lasts
//! until the sealed segment is gone (or 5 s), so that the bystander appends through all of it.
//! Last, whether a sealed segment 52% dead is reclaimed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Seq, SessionId, Stamped};

use crate::appends::{Measured, event};
use crate::args::WorkDir;
use crate::file::segment_files;
use crate::table::{Compare, Section, Table, fmt_us};
use crate::turns::{Contender, in_turns};

/// How long a slice with compaction waits for the sealed segment to go.
const RECLAIM_WAIT: Duration = Duration::from_secs(5);
/// How long the last check waits for a segment 52% dead to go.
const HALF_WAIT: Duration = Duration::from_secs(2);

/// A journal prepared for one slice.
struct Prepared {
    store: FileStore,
    /// The sealed segment's file.
    sealed: PathBuf,
    /// The session whose delete makes the sealed segment mostly dead.
    doomed: SessionId,
    /// A session with one batch, in the active segment.
    small: SessionId,
}

/// A fresh journal in `dir` of `segment`-byte segments whose first, sealed segment holds batches
/// of 4 256-byte events of a doomed and a kept session, `dead` of every `dead + kept`
/// batches the doomed one's, evenly spread; then one batch of a small session.
fn prepare(dir: &Path, segment: u64, (dead, kept): (u64, u64)) -> Result<Prepared, String> {
    let options = FileOptions::new().segment_size(segment);
    let store = FileStore::open(dir, options).map_err(|e| format!("file: {e}"))?;
    let doomed = SessionId::new("doomed00").unwrap();
    let keep = SessionId::new("keeping0").unwrap();
    let small = SessionId::new("small000").unwrap();
    let events: Vec<Stamped> = vec![event(256); 4];
    let mut tails = [Seq(0), Seq(0)];
    let append = |s: &SessionId, tail: Seq| {
        store
            .append(s, tail, &events, Durability::Buffered)
            .map(|a| a.next)
            .map_err(|e| format!("preparing {}: appending to {s}: {e}", dir.display()))
    };
    let every = dead + kept;
    let sessions = [&doomed, &keep];
    for i in 0u64.. {
        if store.index_size().segments > 1 {
            break;
        }
        let to_doomed = (i + 1) * dead / every != i * dead / every;
        let k = usize::from(!to_doomed);
        let (Some(tail), Some(s)) = (tails.get_mut(k), sessions.get(k)) else { break };
        *tail = append(s, *tail)?;
    }
    append(&small, Seq(0))?;
    let sealed = segment_files(dir)?.first().cloned().ok_or("no sealed segment")?;
    Ok(Prepared { store, sealed, doomed, small })
}

/// What one slice measured beside the bystander's appends.
#[derive(Debug, Default)]
struct Seen {
    /// Each delete's latency.
    deletes: Vec<Duration>,
    /// Per slice with compaction: how long after the delete began the sealed segment was gone.
    reclaimed: Vec<Option<Duration>>,
}

/// One slice: the bystander appends while the main thread deletes (the doomed session, or the
/// small one) a quarter into `budget`.
fn slice(
    p: &Prepared,
    compact: bool,
    budget: Duration,
    seen: &Mutex<Seen>,
) -> Result<(Measured, Option<u64>), String> {
    let stop = AtomicBool::new(false);
    let go = Barrier::new(2);
    let syncs_before = p.store.stats().syncs;
    let bystander = SessionId::new("bystand0").unwrap();
    let events = [event(256)];
    let (appended, deleted) = std::thread::scope(|scope| {
        let (stop, go, bystander, events, store) = (&stop, &go, &bystander, &events, &p.store);
        let h = scope.spawn(move || -> Result<(u64, Histogram<u64>, Duration), String> {
            let hist = Histogram::<u64>::new(3).map_err(|e| e.to_string());
            go.wait();
            let mut hist = hist?;
            let start = Instant::now();
            let mut tail = Seq(0);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                tail = store
                    .append(bystander, tail, events, Durability::Synced)
                    .map_err(|e| format!("bystander append at {tail}: {e}"))?
                    .next;
                let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                hist.record(ns.max(1)).map_err(|e| e.to_string())?;
                n += 1;
            }
            Ok((n, hist, start.elapsed()))
        });
        go.wait();
        let deleted = delete_and_wait(p, compact, budget);
        stop.store(true, Ordering::Relaxed);
        let appended = h.join().map_err(|_| "the bystander panicked".to_owned());
        (appended, deleted)
    });
    let (delete, reclaimed) = deleted?;
    let (n, hist, elapsed) = appended??;
    if let Ok(mut s) = seen.lock() {
        s.deletes.push(delete);
        if compact {
            s.reclaimed.push(reclaimed);
        }
    }
    let mut m = Measured::empty()?;
    m.appends = n;
    m.events = n;
    m.bytes = n * 256;
    m.elapsed = elapsed;
    m.latency.add(&hist).map_err(|e| e.to_string())?;
    Ok((m, Some(p.store.stats().syncs - syncs_before)))
}

/// Waits a quarter of `budget`, deletes, and waits until `budget` has passed and, with
/// compaction, the sealed segment is gone (or [`RECLAIM_WAIT`] passed). Returns the delete's
/// latency and when the segment was seen gone.
fn delete_and_wait(
    p: &Prepared,
    compact: bool,
    budget: Duration,
) -> Result<(Duration, Option<Duration>), String> {
    let start = Instant::now();
    std::thread::sleep(budget / 4);
    let session = if compact { &p.doomed } else { &p.small };
    let t = Instant::now();
    let found = p.store.delete(session).map_err(|e| format!("deleting {session}: {e}"))?;
    let delete = t.elapsed();
    if !found {
        return Err(format!("deleting {session}: the store did not have it"));
    }
    let mut gone = None;
    loop {
        if gone.is_none() && !p.sealed.exists() {
            gone = Some(t.elapsed());
        }
        let waited = !compact || gone.is_some() || t.elapsed() >= RECLAIM_WAIT;
        if waited && start.elapsed() >= budget {
            return Ok((delete, gone));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A contender: the bystander beside a delete with compaction or without.
fn contender(base: &Path, segment: u64, compact: bool, seen: Arc<Mutex<Seen>>) -> Contender {
    let name = if compact { "with" } else { "without" };
    let base = base.join(name);
    let seg = segment >> 20;
    let workload = if compact {
        format!(
            "bystander: Synced 256 B appends, 1 session, while a delete makes a sealed segment \
             80% dead ({seg} MiB segments)"
        )
    } else {
        format!(
            "bystander: Synced 256 B appends, 1 session, while a delete reclaims nothing \
             ({seg} MiB segments)"
        )
    };
    let shown = Arc::clone(&seen);
    Contender::new(
        "file",
        key(compact),
        workload,
        "latency per append; each slice on a journal of its own: one sealed segment and the \
         active one",
        Box::new(move |round, budget| {
            let dir = base.join(format!("{round}"));
            let p = prepare(&dir, segment, (4, 1))?;
            let measured = slice(&p, compact, budget, &seen);
            drop(p);
            let _ = std::fs::remove_dir_all(&dir);
            measured
        }),
    )
    .remark(Box::new(move || shown.lock().ok().map(|s| describe(&s))))
}

fn key(compact: bool) -> String {
    format!("file.compaction.bystander.{}", if compact { "with" } else { "without" })
}

/// The deletes' latencies and, with compaction, when the segment went.
fn describe(s: &Seen) -> String {
    let mut deletes = s.deletes.clone();
    deletes.sort();
    let p50 = deletes.get(deletes.len() / 2).copied().unwrap_or_default();
    let max = deletes.last().copied().unwrap_or_default();
    let mut out = format!(
        "the delete took {} at p50, {} at most",
        fmt_us(p50.as_secs_f64() * 1e6),
        fmt_us(max.as_secs_f64() * 1e6)
    );
    if !s.reclaimed.is_empty() {
        let gone: Vec<Duration> = s.reclaimed.iter().flatten().copied().collect();
        let slowest = gone.iter().max().copied().unwrap_or_default();
        out.push_str(&format!(
            "; the sealed segment was gone in {} of {} slices, at most {} after the delete began",
            gone.len(),
            s.reclaimed.len(),
            fmt_us(slowest.as_secs_f64() * 1e6)
        ));
    }
    out
}

/// Whether a sealed segment 52% dead is reclaimed within [`HALF_WAIT`] of the delete.
fn half_dead(dir: &Path, segment: u64) -> Result<String, String> {
    let p = prepare(dir, segment, (13, 12))?;
    let t = Instant::now();
    p.store.delete(&p.doomed).map_err(|e| format!("deleting {}: {e}", p.doomed))?;
    while p.sealed.exists() && t.elapsed() < HALF_WAIT {
        std::thread::sleep(Duration::from_millis(1));
    }
    let gone = !p.sealed.exists();
    drop(p);
    Ok(if gone {
        format!(
            "a sealed segment 52% dead was reclaimed {} after its delete began",
            fmt_us(t.elapsed().as_secs_f64() * 1e6)
        )
    } else {
        format!(
            "a sealed segment 52% dead was not reclaimed within {} s of its delete",
            HALF_WAIT.as_secs()
        )
    })
}

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("compaction")?;
    let segment = work.compaction_segment();
    let with = Arc::new(Mutex::new(Seen::default()));
    let without = Arc::new(Mutex::new(Seen::default()));
    let contenders = vec![
        contender(&dir, segment, true, Arc::clone(&with)),
        contender(&dir, segment, false, Arc::clone(&without)),
    ];
    let turned = in_turns(work, contenders)?;
    let half = half_dead(&dir.join("half"), segment)?;
    for t in turned {
        let compact = t.key == key(true);
        let note = format!("{}; {half}", t.note);
        let mut row = t.row(Section::Compaction, Measured::appends_per_sec, "appends/s");
        if compact {
            row = row.vs("without compaction", Compare::to(key(false))).note(note);
        }
        table.push(row);
    }
    work.clear(&dir);
    Ok(())
}
