//! Space freed when half of many interleaved sessions are deleted: `SESSIONS` sessions, each
//! live for a fifth of the journal's history (their starts spread evenly, so about twenty are
//! live at once, as in a service whose sessions come and go), are appended to (batches of one
//! to eight 1 KiB events, `Buffered`, each to a live session picked at random from a fixed
//! seed) until the journal holds [`WorkDir::reclaim_bytes`] in segments of
//! [`WorkDir::reclaim_segment`] bytes; then a random half of the sessions is deleted, and the
//! reclaim thread is waited for ([`FileStore::wait_reclaimed`], until the journal's bytes stop
//! falling). Each segment holds a different mix of sessions, so the share of it the deletes
//! make dead differs from segment to segment, as it does in use. The
//! journal's bytes (its segment files) before the deletes and after: the share freed, beside
//! the share of the history deleted (half). The default compaction policy beside the one before
//! it (`compact_when_dead` 50), each on a journal of its own, in the same run. And the same
//! workload trimmed instead of deleted: each session gets a `snapshot` once it holds half of
//! its expected bytes, and at the end every session is trimmed to it (a `trimmed` appended),
//! dropping about half of every session's history instead of half of the sessions.

use std::path::Path;
use std::time::Instant;

use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Seq, SessionId, Stamped};

use crate::appends::event;
use crate::args::WorkDir;
use crate::file::segment_files;
use crate::table::{Row, Section, Table, fmt_us};

/// How many sessions interleave.
const SESSIONS: usize = 100;

/// What one journal did.
struct Freed {
    before: u64,
    after: u64,
    /// Segment files before and after.
    files: (usize, usize),
    /// From the first delete to the end of reclaim.
    secs: f64,
    deleted_bytes: u64,
    appended_bytes: u64,
}

fn journal_bytes(dir: &Path) -> Result<(u64, usize), String> {
    let files = segment_files(dir)?;
    let mut bytes = 0;
    for f in &files {
        bytes += std::fs::metadata(f).map_err(|e| format!("{}: {e}", f.display()))?.len();
    }
    Ok((bytes, files.len()))
}

/// How half of the history goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Drop {
    /// Half of the sessions deleted.
    Delete,
    /// Every session trimmed to a snapshot at about half its history.
    Trim,
}

fn measure(dir: &Path, work: &WorkDir, percent: Option<u8>, how: Drop) -> Result<Freed, String> {
    let mut options = FileOptions::new().segment_size(work.reclaim_segment());
    if let Some(p) = percent {
        options = options.compact_when_dead(p);
    }
    let store = FileStore::open(dir, options).map_err(|e| format!("file: {e}"))?;
    let sessions: Vec<SessionId> = (0..SESSIONS)
        .map(|i| SessionId::new(format!("reclaim-{i:03}")).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let one = event(1024);
    let mut tails = vec![Seq(0); SESSIONS];
    let mut appended = vec![0u64; SESSIONS];
    let target = work.reclaim_bytes();
    // About 4.5 KiB a batch on average.
    let batches = target / (9 * 512);
    let mut rng = Lcg(0x005E_ED0F_5E55_1045);
    let mut total = 0u64;
    // Where each session's snapshot is, and its bytes before it (the trim's workload).
    let snapshot = Stamped::at(
        stepjournal_codec::UnixMillis(1_700_000_000_000),
        stepjournal_codec::Event::from(
            stepjournal::recovery::fold(&[]).snapshot().ok_or("an empty session has a snapshot")?,
        ),
    );
    let half = target / SESSIONS as u64 / 2;
    let mut snapshots: Vec<Option<(Seq, u64)>> = vec![None; SESSIONS];
    for k in 0..batches {
        // Session i lives from i/(SESSIONS - 1) × 4/5 of the history for a fifth of it: one
        // at least is live at every point.
        let at = k as f64 / batches as f64;
        let live: Vec<usize> = (0..SESSIONS)
            .filter(|i| {
                let start = *i as f64 / (SESSIONS - 1) as f64 * 0.8;
                (start..start + 0.2).contains(&at)
            })
            .collect();
        let Some(&i) = live.get((rng.next() % live.len().max(1) as u64) as usize) else {
            continue;
        };
        let n = 1 + (rng.next() % 8) as usize;
        let batch: Vec<Stamped> = vec![one.clone(); n];
        let s = &sessions[i];
        let ack = store
            .append(s, tails[i], &batch, Durability::Buffered)
            .map_err(|e| format!("appending to {s}: {e}"))?;
        tails[i] = ack.next;
        appended[i] += n as u64 * 1024;
        total += n as u64 * 1024;
        if how == Drop::Trim && snapshots[i].is_none() && appended[i] >= half {
            let ack = store
                .append(s, tails[i], std::slice::from_ref(&snapshot), Durability::Buffered)
                .map_err(|e| format!("appending a snapshot to {s}: {e}"))?;
            snapshots[i] = Some((tails[i], appended[i]));
            tails[i] = ack.next;
        }
    }
    store.wait_reclaimed();
    let (before, before_files) = journal_bytes(dir)?;
    let t = Instant::now();
    let mut deleted_bytes = 0;
    match how {
        Drop::Delete => {
            for &i in crate::turns::order(SESSIONS, 7).iter().take(SESSIONS / 2) {
                let s = &sessions[i];
                store.delete(s).map_err(|e| format!("deleting {s}: {e}"))?;
                deleted_bytes += appended[i];
            }
        }
        Drop::Trim => {
            for (i, s) in sessions.iter().enumerate() {
                let Some((before, bytes)) = snapshots[i] else { continue };
                let trimmed = stepjournal_codec::Trimmed { before, turns: 0 };
                let trimmed = Stamped::at(snapshot.at, stepjournal_codec::Event::Trimmed(trimmed));
                store
                    .append(s, tails[i], &[trimmed], Durability::Buffered)
                    .map_err(|e| format!("trimming {s}: {e}"))?;
                deleted_bytes += bytes;
            }
        }
    }
    // A compaction's copies fill and seal segments the thread then looks at again: waited for
    // until the journal's bytes stop falling.
    let mut last = u64::MAX;
    loop {
        store.wait_reclaimed();
        let (now, _) = journal_bytes(dir)?;
        if now >= last {
            break;
        }
        last = now;
    }
    let secs = t.elapsed().as_secs_f64();
    let (after, after_files) = journal_bytes(dir)?;
    drop(store);
    Ok(Freed {
        before,
        after,
        files: (before_files, after_files),
        secs,
        deleted_bytes,
        appended_bytes: total,
    })
}

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("reclaim")?;
    let policies: [(&str, Option<u8>, Drop, &str); 3] = [
        ("default", None, Drop::Delete, "deleted, the default policy"),
        ("dead50", Some(50), Drop::Delete, "deleted, compact_when_dead 50 (the default before)"),
        ("trim", None, Drop::Trim, "each trimmed to a snapshot at half its history"),
    ];
    for (tag, percent, how, what) in policies {
        let freed = measure(&dir.join(tag), work, percent, how)?;
        let share = 1.0 - freed.after as f64 / freed.before.max(1) as f64;
        let dropped = freed.deleted_bytes as f64 / freed.appended_bytes.max(1) as f64;
        let mut row = Row::new(
            Section::Compaction,
            format!("compaction.freed.{tag}"),
            "file",
            match how {
                Drop::Delete => format!(
                    "bytes freed when half of {SESSIONS} interleaved sessions (20 live at a time) \
                     are {what}"
                ),
                Drop::Trim => format!(
                    "bytes freed when {SESSIONS} interleaved sessions (20 live at a time) are {what}"
                ),
            },
            share * 100.0,
            "% freed",
            freed.secs,
        )
        .note(format!(
            "{:.1}% of the journal freed ({} → {} MB, {} → {} segments of {} MB) when {:.1}% \
             of the history was dropped; reclaimed in {} after the first delete \
             (wait_reclaimed until the bytes stopped falling); target >= 40% freed",
            share * 100.0,
            freed.before / 1_000_000,
            freed.after / 1_000_000,
            freed.files.0,
            freed.files.1,
            work.reclaim_segment() / 1_000_000,
            dropped * 100.0,
            fmt_us(freed.secs * 1e6),
        ));
        if tag == "default" {
            row = row.vs(
                "compact_when_dead 50",
                crate::table::Compare::rate_only("compaction.freed.dead50", 1.0),
            );
        }
        table.push(row);
    }
    work.clear(&dir);
    Ok(())
}

/// A linear congruential generator: the workload is the same in every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 =
            self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}
