//! The file backend's contender in the synced and buffered groups, the row of a `Buffered`
//! append for any backend, and the segment files of a journal.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stepjournal_backends::Durability;
use stepjournal_backends::file::{FileOptions, FileStore};

use crate::appends::{event, on_store};
use crate::table::{Compare, Latency, Row, Section};
use crate::turns::Contender;

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

pub fn segment_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    files_ending(dir, "seg")
}

/// The sidecar index files of the file journal in `dir`, in order.
pub fn sidecar_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    files_ending(dir, "idx")
}

fn files_ending(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    Ok(files)
}
