//! Opening a large journal, at 4 events per batch and at 1, cold and warm, each beside a
//! sequential read of its files in the same cache state, with the bytes the open read (`rchar`)
//! over the journal's bytes, and over what a sealed-segment index allows (the active segment and
//! 3% of the sealed bytes).

use std::path::{Path, PathBuf};
use std::time::Instant;

use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Seq, SessionId};

use crate::appends::event;
use crate::args::WorkDir;
use crate::file::{segment_files, sidecar_files};
use crate::procio::ReadCounter;
use crate::table::{Compare, Row, Section, Table};

/// Events per batch of the journals opened.
const BATCHES: [usize; 2] = [4, 1];

/// The bytes free on the file system holding `dir`, if `df` can tell.
fn free_bytes(dir: &Path) -> Option<u64> {
    let out = std::process::Command::new("df").arg("-Pk").arg(dir).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().nth(1)?;
    let kib: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    Some(kib * 1024)
}

fn open(dir: &Path, segment: u64) -> Result<FileStore, String> {
    FileStore::open(dir, FileOptions::new().segment_size(segment)).map_err(|e| format!("file: {e}"))
}

/// Fills a journal of `segment`-byte segments with buffered appends of `batch` 256-byte events
/// until it holds `target` bytes: 16 writers, 4 sessions each.
fn fill(dir: &Path, segment: u64, target: u64, batch: usize) -> Result<(), String> {
    let store = open(dir, segment)?;
    std::thread::scope(|scope| -> Result<(), String> {
        let handles: Vec<_> = (0..16)
            .map(|t| {
                let store = &store;
                scope.spawn(move || -> Result<(), String> {
                    let events: Vec<_> = (0..batch).map(|_| event(256)).collect();
                    let names: Vec<_> = (0..4)
                        .map(|k| SessionId::new(format!("open-{t}-{k}").as_str()).unwrap())
                        .collect();
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

fn len(f: &Path) -> u64 {
    std::fs::metadata(f).map_or(0, |m| m.len())
}

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let cold_ok = {
        let probe = work.sub("file-open-probe")?;
        let ok = crate::cache::available(&probe);
        work.clear(&probe);
        ok
    };
    if !cold_ok {
        eprintln!(
            "stepjournal-bench: dd cannot evict files from the page cache here: no cold rows"
        );
    }
    for batch in BATCHES {
        journal_rows(work, table, batch, cold_ok)?;
    }
    Ok(())
}

/// The rows of one journal, of `batch` events per batch.
fn journal_rows(
    work: &WorkDir,
    table: &mut Table,
    batch: usize,
    cold_ok: bool,
) -> Result<(), String> {
    let dir = work.sub(&format!("file-open-{batch}"))?;
    let wanted = work.open_bytes();
    let target = match free_bytes(&dir) {
        Some(free) if free / 3 < wanted => (free / 3) & !((64 << 20) - 1),
        _ => wanted,
    }
    .max(16 << 20);
    let segment = work.open_segment();
    fill(&dir, segment, target, batch)?;
    // Opened once untimed: that cuts the zeros preallocated ahead of the data (a write and a
    // sync), which every later open then finds done; and waited for until the reclaim thread
    // has written the sidecar index of every sealed segment (as it does after each seal).
    {
        let store = open(&dir, segment)?;
        store.wait_reclaimed();
    }
    let files: Vec<PathBuf> = segment_files(&dir)?;
    let sidecars: Vec<PathBuf> = sidecar_files(&dir)?;
    let sidecar_bytes: u64 = sidecars.iter().map(|f| len(f)).sum();
    let evicted: Vec<PathBuf> = files.iter().chain(&sidecars).cloned().collect();
    let bytes: u64 = files.iter().map(|f| len(f)).sum();
    let active = files.last().map_or(0, |f| len(f));
    let allowed = active as f64 + 0.03 * (bytes - active) as f64;
    let gb = bytes as f64 / 1e9;
    let sized = if target < wanted {
        format!("{gb:.2} GB (free disk allowed no more)")
    } else {
        format!("{gb:.2} GB")
    };
    let plural = if batch == 1 { "" } else { "s" };
    for cold in [true, false] {
        if cold && !cold_ok {
            continue;
        }
        let cache = if cold { "cold" } else { "warm" };
        let read_key = format!("raw.read.open.{cache}.x{batch}");
        let what = format!("the open row's segments ({batch} event{plural} per batch)");
        table.push(crate::raw::read_row(&read_key, &files, &what, cold)?);
        if cold {
            crate::cache::evict(&evicted)?;
        }
        let counter = ReadCounter::start();
        let start = Instant::now();
        let store = open(&dir, segment)?;
        let secs = start.elapsed().as_secs_f64();
        let read = counter.and_then(|c| c.bytes());
        let size = store.index_size();
        drop(store);
        let reads = match read {
            Some(r) => format!(
                "read {:.1} MB at open: {:.3}x the journal's bytes, {:.2}x the active segment \
                 ({:.1} MB) plus 3% of the sealed bytes",
                r as f64 / 1e6,
                r as f64 / bytes.max(1) as f64,
                r as f64 / allowed.max(1.0),
                active as f64 / 1e6
            ),
            None => "bytes read not known (/proc/self/io cannot be read)".to_owned(),
        };
        let mut row = Row::new(
            Section::Open,
            if batch == 4 {
                format!("file.open.{cache}")
            } else {
                format!("file.open.{cache}.x{batch}")
            },
            "file",
            format!("open {sized}, {batch} event{plural} per batch, {cache} cache"),
            gb / secs,
            "GB/s",
            secs,
        )
        .mb(bytes as f64 / 1e6 / secs)
        .vs_raw(Compare::bytes(read_key))
        .note(format!(
            "whole open {}; {reads}; {} batches of {batch} event{plural}, {} sessions, {} \
             segments, {} sidecar indexes of {:.1} MB; bytes read/byte: over the journal's \
             bytes; {}",
            crate::table::fmt_us(secs * 1e6),
            size.batches,
            size.sessions,
            size.segments,
            sidecars.len(),
            sidecar_bytes as f64 / 1e6,
            crate::cache::describe(cold)
        ));
        if let Some(r) = read {
            row = row.read_per_byte(r as f64 / bytes.max(1) as f64);
        }
        table.push(row);
    }
    work.clear(&dir);
    Ok(())
}
