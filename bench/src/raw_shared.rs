//! The raw row of concurrent syncs on one file: `threads` threads, each writing its records to a
//! region of its own of one preallocated file and calling `fdatasync` on it after each, so as
//! many syncs of one file may be in flight as there are threads. Beside the loop with a file per
//! thread, it says whether this disk and file system finish concurrent syncs of one file faster
//! than one at a time: the case for a second group sync in flight on the file backend's one
//! active segment.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::appends::{Work, measure};
use crate::turns::Contender;

/// Each thread's region of the file: its writes go round in it, so the file never grows.
const REGION: u64 = 1 << 20;

/// The key of the row of `threads` threads syncing one file.
pub fn key(bytes: usize, threads: usize) -> String {
    format!("raw.fsync.shared.{bytes}.t{threads}")
}

/// The contender in the synced group of `bytes`-byte events from `threads` sessions.
pub fn contender(dir: &Path, bytes: usize, threads: usize) -> Result<Contender, String> {
    let path = dir.join(format!("raw-shared-{bytes}-{threads}"));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let zeros = vec![0u8; REGION as usize];
    for i in 0..threads as u64 {
        file.write_all_at(&zeros, i * REGION)
            .map_err(|e| format!("cannot preallocate {}: {e}", path.display()))?;
    }
    file.sync_all().map_err(|e| format!("cannot sync {}: {e}", path.display()))?;
    let file = Arc::new(file);
    Ok(Contender::new(
        "raw",
        key(bytes, threads),
        format!(
            "write + fdatasync, {bytes}-byte records, preallocated, 1 per sync, {threads} threads, \
             one shared file"
        ),
        "concurrent fdatasync calls on one file (each thread a region of its own): whether the \
         disk takes them faster than one at a time",
        Box::new(move |_round, budget| {
            let work = Work { events: 1, bytes: bytes as u64 };
            let syncs = std::sync::atomic::AtomicU64::new(0);
            let m = measure(threads, budget, work, |i| {
                let file: &File = &file;
                let record = vec![b'r'; bytes];
                let base = i as u64 * REGION;
                let mut at = 0u64;
                let syncs = &syncs;
                Ok(move || {
                    if at + bytes as u64 > REGION {
                        at = 0;
                    }
                    file.write_all_at(&record, base + at).map_err(|e| format!("pwrite: {e}"))?;
                    file.sync_data().map_err(|e| format!("fdatasync: {e}"))?;
                    syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    at += bytes as u64;
                    Ok(())
                })
            })?;
            Ok((m, Some(syncs.into_inner())))
        }),
    ))
}
