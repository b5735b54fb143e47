//! The file backend's rows: synced appends from 1, 8 and 64 sessions, buffered throughput, and
//! opening a large journal.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore};

use crate::appends::{Measured, measure};
use crate::args::WorkDir;
use crate::table::{Baseline, RAW_READ, Row, Table};

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    table.push(single_appender(work)?);
    for sessions in [8usize, 64] {
        let (m, fsyncs) = run(work, sessions, 1, Durability::Synced)?;
        table.push(Row {
            group: "file",
            workload: format!("Synced, {sessions} session{}", if sessions == 1 { "" } else { "s" }),
            rate: m.appends_per_sec(),
            unit: "appends/s",
            p50_us: Some(m.p50_us()),
            p99_us: Some(m.p99_us()),
            fsyncs_per_append: Some(fsyncs),
            baseline: Baseline::FsyncLoop,
            note: "1 event of 256 bytes of text per append".to_owned(),
        });
    }
    for (sessions, batch) in [(1usize, 1usize), (8, 1), (8, 32)] {
        let (m, fsyncs) = run(work, sessions, batch, Durability::Buffered)?;
        table.push(Row {
            group: "file",
            workload: format!("Buffered, {sessions} session(s), {batch} event(s)/append"),
            rate: m.events_per_sec(),
            unit: "events/s",
            p50_us: Some(m.p50_us()),
            p99_us: Some(m.p99_us()),
            fsyncs_per_append: Some(fsyncs),
            baseline: Baseline::FsyncLoop,
            note: "written to the OS, not synced".to_owned(),
        });
    }
    open_rows(work, table)
}

/// One session's synced appends, measured in slices taken in turn with slices of the raw loop
/// on the same file system, so that both see the same disk (on a shared machine its speed
/// drifts); the note gives the p50 ratio of the two.
fn single_appender(work: &WorkDir) -> Result<Row, String> {
    const SLICES: u32 = 6;
    let dir = work.sub("file-synced-1")?;
    let store =
        FileStore::open(dir.join("journal"), FileOptions::new()).map_err(|e| e.to_string())?;
    let mut raw = crate::raw::FsyncLoop::create(&dir.join("raw-loop"))?;
    let slice = work.budget() / SLICES;
    let before = store.stats();
    let mut total: Option<Measured> = None;
    for k in 0..SLICES {
        raw.run(slice)?;
        let m = measure(&store, &format!("bench-{k}"), 1, 1, Durability::Synced, slice)?;
        total = Some(match total {
            None => m,
            Some(mut t) => {
                t.appends += m.appends;
                t.events += m.events;
                t.elapsed += m.elapsed;
                t.latency.add(&m.latency).map_err(|e| e.to_string())?;
                t
            }
        });
    }
    let m = total.ok_or("no slice ran")?;
    let after = store.stats();
    let fsyncs = (after.syncs - before.syncs) as f64 / m.appends.max(1) as f64;
    let raw_p50 = raw.hist.value_at_quantile(0.5) as f64 / 1000.0;
    Ok(Row {
        group: "file",
        workload: "Synced, 1 session".to_owned(),
        rate: m.appends_per_sec(),
        unit: "appends/s",
        p50_us: Some(m.p50_us()),
        p99_us: Some(m.p99_us()),
        fsyncs_per_append: Some(fsyncs),
        baseline: Baseline::FsyncLoop,
        note: format!(
            "1 event of 256 bytes of text per append; in turn with the raw loop: p50 {:.2}x its {}",
            m.p50_us() / raw_p50,
            if raw_p50 >= 1000.0 {
                format!("{:.2} ms", raw_p50 / 1000.0)
            } else {
                format!("{raw_p50:.0} µs")
            }
        ),
    })
}

/// One timed append workload on a fresh journal; returns it and the fsyncs per append.
fn run(
    work: &WorkDir,
    sessions: usize,
    batch: usize,
    durability: Durability,
) -> Result<(Measured, f64), String> {
    let dir = work.sub(&format!("file-{}-{sessions}-{batch}", durability.as_str()))?;
    let store = FileStore::open(&dir, FileOptions::new()).map_err(|e| e.to_string())?;
    let before = store.stats();
    let m = measure(&store, "bench", sessions, batch, durability, work.budget())?;
    let after = store.stats();
    let fsyncs = (after.syncs - before.syncs) as f64 / m.appends.max(1) as f64;
    Ok((m, fsyncs))
}

/// The bytes free on the file system holding `dir`, if `df` can tell.
fn free_bytes(dir: &Path) -> Option<u64> {
    let out = std::process::Command::new("df").arg("-Pk").arg(dir).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().nth(1)?;
    let kib: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    Some(kib * 1024)
}

fn segment_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    files.sort();
    Ok(files)
}

/// Opening a large journal (the index rebuilt by one scan), against reading its files.
fn open_rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("file-open")?;
    let wanted: u64 = if work.quick { 64 << 20 } else { 1 << 30 };
    let free = free_bytes(&dir);
    let target = match free {
        Some(free) if free / 3 < wanted => (free / 3) & !((64 << 20) - 1),
        _ => wanted,
    }
    .max(16 << 20);
    // Build it: 16 writers, 4 sessions each, batches of 4 events, buffered.
    {
        let store = FileStore::open(&dir, FileOptions::new()).map_err(|e| e.to_string())?;
        std::thread::scope(|scope| -> Result<(), String> {
            let handles: Vec<_> = (0..16)
                .map(|t| {
                    let store = &store;
                    scope.spawn(move || -> Result<(), String> {
                        let events: Vec<_> = (0..4).map(|_| crate::appends::event()).collect();
                        let names: Vec<_> = (0..4)
                            .map(|k| {
                                stepjournal_codec::SessionId::from(format!("open-{t}-{k}").as_str())
                            })
                            .collect();
                        let mut tails = [stepjournal_codec::Seq(0); 4];
                        let mut i = 0usize;
                        while store.stats().bytes < target {
                            let k = i % 4;
                            let (Some(s), Some(tail)) = (names.get(k), tails.get_mut(k)) else {
                                break;
                            };
                            let ack = store
                                .append(s, *tail, &events, Durability::Buffered)
                                .map_err(|e| e.to_string())?;
                            *tail = ack.next;
                            i += 1;
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().map_err(|_| "a writer panicked".to_owned())??;
            }
            Ok(())
        })?;
    }
    let files = segment_files(&dir)?;
    let mut bytes = 0u64;
    for f in &files {
        let file = std::fs::File::open(f).map_err(|e| e.to_string())?;
        file.sync_all().map_err(|e| e.to_string())?;
        bytes += file.metadata().map_err(|e| e.to_string())?.len();
    }
    let gb = bytes as f64 / 1e9;
    let sized = if target < wanted {
        format!("{:.2} GB (free disk allowed no more)", gb)
    } else {
        format!("{gb:.2} GB")
    };

    // The raw read first, so both run on a warm page cache.
    let start = Instant::now();
    let mut buf = vec![0u8; 4 << 20];
    for f in &files {
        let mut file = std::fs::File::open(f).map_err(|e| e.to_string())?;
        while file.read(&mut buf).map_err(|e| e.to_string())? > 0 {}
    }
    let read_s = start.elapsed().as_secs_f64();
    table.push(Row {
        group: "raw",
        workload: RAW_READ.to_owned(),
        rate: gb / read_s,
        unit: "GB/s",
        p50_us: None,
        p99_us: None,
        fsyncs_per_append: None,
        baseline: Baseline::SequentialRead,
        note: format!("{sized}, 4 MiB reads, warm page cache"),
    });

    let start = Instant::now();
    let store = FileStore::open(&dir, FileOptions::new()).map_err(|e| e.to_string())?;
    let open_s = start.elapsed().as_secs_f64();
    let size = store.index_size();
    drop(store);
    table.push(Row {
        group: "file",
        workload: format!("open {sized}: one scan rebuilds the index"),
        rate: gb / open_s,
        unit: "GB/s",
        p50_us: Some(open_s * 1e6),
        p99_us: None,
        fsyncs_per_append: None,
        baseline: Baseline::SequentialRead,
        note: format!(
            "{} batches of 4 events in {} segments, warm page cache; p50 = the whole open",
            size.batches, size.segments
        ),
    });
    Ok(())
}
