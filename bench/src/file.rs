//! The file backend's rows: its contender in the synced and buffered groups, the row of a
//! `Buffered` append for any backend, and opening a large journal (one scan rebuilds the index)
//! against reading its files.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Seq, SessionId};

use crate::appends::{event, on_store};
use crate::args::WorkDir;
use crate::synced::Contender;
use crate::table::{Compare, Latency, Row, Section, Table};

pub fn open(dir: &Path) -> Result<FileStore, String> {
    FileStore::open(dir, FileOptions::new()).map_err(|e| format!("file: {e}"))
}

/// The file backend in a synced or buffered group: `threads` sessions appending `batch`
/// `bytes`-byte events at a time.
pub fn contender(
    dir: &Path,
    bytes: usize,
    threads: usize,
    batch: usize,
    durability: Durability,
) -> Result<Contender, String> {
    let store = Arc::new(open(&dir.join("file"))?);
    let events = vec![event(bytes); batch.max(1)];
    let (key, note) = match durability {
        Durability::Synced => (
            format!("file.{}.{bytes}.{threads}", durability.as_str()),
            "group commit: one write and one fdatasync per group",
        ),
        _ => (
            format!("file.{}.{bytes}.{threads}.x{batch}", durability.as_str()),
            "written to the OS, not synced",
        ),
    };
    Ok(Contender::new(
        "file",
        key,
        String::new(),
        note,
        Box::new(move |round, budget| {
            let before = store.stats().syncs;
            let m = on_store(&*store, round, threads, &events, durability, budget)?;
            Ok((m, Some(store.stats().syncs - before)))
        }),
    ))
}

/// The workload name of a `Buffered` row of 256-byte events, for any backend.
pub fn buffered_workload(sessions: usize, batch: usize) -> String {
    let plural = if sessions == 1 { "" } else { "s" };
    format!("Buffered, 256 B events, {sessions} session{plural}, {batch} event(s)/append")
}

/// A `Buffered` row of 256-byte events, for any backend: compared with the `write` loop
/// without sync and plain SQLite `NORMAL`, from the same threads with as many events per write
/// and per transaction; never with a synced baseline.
pub fn buffered_row(
    group: &'static str,
    key: String,
    m: &crate::appends::Measured,
    sessions: usize,
    batch: usize,
    syncs: Option<u64>,
    note: &str,
) -> Row {
    Row::new(
        Section::Buffered,
        key,
        group,
        buffered_workload(sessions, batch),
        m.events_per_sec(),
        "events/s",
        m.elapsed.as_secs_f64(),
    )
    .mb(m.mb_per_sec())
    .latency(Latency::of(&m.latency))
    .fsyncs(syncs.map(|s| s as f64 / m.appends.max(1) as f64))
    .vs_raw(Compare::to(crate::raw::unsynced_key(sessions, batch)))
    .vs_sqlite(Compare::to(crate::plain::normal_key(256, sessions, batch)))
    .note(format!("{note}; latency per append"))
}

/// The bytes free on the file system holding `dir`, if `df` can tell.
fn free_bytes(dir: &Path) -> Option<u64> {
    let out = std::process::Command::new("df").arg("-Pk").arg(dir).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().nth(1)?;
    let kib: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    Some(kib * 1024)
}

pub fn segment_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    files.sort();
    Ok(files)
}

/// Fills a journal with buffered appends of 4 256-byte events until it holds `target` bytes:
/// 16 writers, 4 sessions each.
fn fill(dir: &Path, target: u64) -> Result<(), String> {
    let store = open(dir)?;
    std::thread::scope(|scope| -> Result<(), String> {
        let handles: Vec<_> = (0..16)
            .map(|t| {
                let store = &store;
                scope.spawn(move || -> Result<(), String> {
                    let events: Vec<_> = (0..4).map(|_| event(256)).collect();
                    let names: Vec<_> =
                        (0..4).map(|k| SessionId::from(format!("open-{t}-{k}").as_str())).collect();
                    let mut tails = [Seq(0); 4];
                    for i in 0usize.. {
                        if store.stats().bytes >= target {
                            break;
                        }
                        let k = i % 4;
                        let (Some(s), Some(tail)) = (names.get(k), tails.get_mut(k)) else {
                            break;
                        };
                        let ack = store
                            .append(s, *tail, &events, Durability::Buffered)
                            .map_err(|e| e.to_string())?;
                        *tail = ack.next;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "a writer panicked".to_owned())??;
        }
        Ok(())
    })
}

/// Opening a large journal, cold and warm, each after a sequential read of its files in the
/// same cache state.
pub fn open_rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("file-open")?;
    let wanted = work.open_bytes();
    let free = free_bytes(&dir);
    let target = match free {
        Some(free) if free / 3 < wanted => (free / 3) & !((64 << 20) - 1),
        _ => wanted,
    }
    .max(16 << 20);
    fill(&dir, target)?;
    // Opened once untimed: that cuts the zeros preallocated ahead of the data (a write and a
    // sync), which every later open then finds done.
    drop(open(&dir)?);
    let files = segment_files(&dir)?;
    let bytes: u64 = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
    let gb = bytes as f64 / 1e9;
    let sized = if target < wanted {
        format!("{gb:.2} GB (free disk allowed no more)")
    } else {
        format!("{gb:.2} GB")
    };
    let cold_ok = crate::cache::available(&dir);
    if !cold_ok {
        eprintln!(
            "stepjournal-bench: dd cannot evict files from the page cache here: no cold rows"
        );
    }
    for cold in [true, false] {
        if cold && !cold_ok {
            continue;
        }
        let cache = if cold { "cold" } else { "warm" };
        let read_key = format!("raw.read.open.{cache}");
        table.push(crate::raw::read_row(&read_key, &files, "the open row's segments", cold)?);
        if cold {
            crate::cache::evict(&files)?;
        }
        let start = Instant::now();
        let store = open(&dir)?;
        let secs = start.elapsed().as_secs_f64();
        let size = store.index_size();
        drop(store);
        table.push(
            Row::new(
                Section::Open,
                format!("file.open.{cache}"),
                "file",
                format!("open {sized}, {cache} cache: one scan rebuilds the index"),
                gb / secs,
                "GB/s",
                secs,
            )
            .mb(bytes as f64 / 1e6 / secs)
            .vs_raw(Compare::bytes(read_key))
            .note(format!(
                "whole open {}; {} batches of 4 events, {} sessions, {} segments; {}",
                crate::table::fmt_us(secs * 1e6),
                size.batches,
                size.sessions,
                size.segments,
                crate::cache::describe(cold)
            )),
        );
    }
    work.clear(&dir);
    Ok(())
}
