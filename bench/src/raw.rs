//! The raw rows: what the disk does without stepjournal, the limits the other rows are compared
//! with. A loop of `write` + `fdatasync` of records, one record per sync or batched, on a file
//! that grows with every write or on one preallocated with zeros the way the file backend does
//! (so that its syncs change no file metadata), from one thread or from several, each on a file
//! of its own; a `write` loop without sync, the limit of `Buffered` appends; and a sequential
//! read of files.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::appends::{Measured, Work, measure};
use crate::args::WorkDir;
use crate::table::{Compare, Latency, Row, Section, Table};
use crate::turns::Contender;

/// How far ahead of the data the preallocated loop writes zeros: the file backend's default.
const PREALLOCATE: u64 = 1 << 20;

/// How many bytes the loop without sync writes over and over (from its start again when full),
/// so that a long run neither fills the disk nor measures the allocation of new blocks.
const RING: u64 = 8 << 20;

/// The key of the raw loop of one `bytes`-byte record per sync on a preallocated file from
/// `threads` threads (each on a file of its own), the baseline of every durable append row with
/// events of that size from that many threads.
pub fn fsync_key(bytes: usize, threads: usize) -> String {
    if threads == 1 {
        format!("raw.fsync.prealloc.{bytes}")
    } else {
        format!("raw.fsync.prealloc.{bytes}.t{threads}")
    }
}

/// The key of the `write` loop without sync of `per_write` 256-byte records per write from
/// `threads` threads, the baseline of the `Buffered` rows with those.
pub fn unsynced_key(threads: usize, per_write: usize) -> String {
    format!("raw.write.256.t{threads}.x{per_write}")
}

/// The batched and growing variants, measured one after the other (the one-record-per-sync
/// preallocated loops are measured in turn with the synced rows: see [`contender`]).
pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("raw")?;
    for (preallocate, per_sync) in [(true, 16), (true, 256), (false, 1), (false, 16), (false, 256)]
    {
        let path = dir.join(format!("loop-{preallocate}-{per_sync}"));
        let mut f = FsyncLoop::create(&path, 256, per_sync, preallocate)?;
        let before = f.syncs;
        let m = f.run(work.budget())?;
        table.push(row(&m, 256, per_sync, preallocate, f.syncs - before));
        drop(f);
        let _ = std::fs::remove_file(&path);
    }
    work.clear(&dir);
    Ok(())
}

/// The preallocated one-record-per-sync loop as a contender in the group of `bytes`-byte events
/// from `threads` sessions: as many threads, each looping on a file of its own, so that their
/// syncs are as independent as the disk makes them.
pub fn contender(dir: &Path, bytes: usize, threads: usize) -> Result<Contender, String> {
    let mut loops = Vec::with_capacity(threads);
    for i in 0..threads {
        let path = dir.join(format!("raw-loop-{bytes}-{threads}-{i}"));
        loops.push(Mutex::new(FsyncLoop::create(&path, bytes, 1, true)?));
    }
    let (workload, note) = if threads == 1 {
        (
            format!("write + fdatasync, {bytes}-byte records, preallocated, 1 per sync"),
            "the disk's limit for one durable append at a time",
        )
    } else {
        (
            format!(
                "write + fdatasync, {bytes}-byte records, preallocated, 1 per sync, {threads} \
                 threads, a file each"
            ),
            "the disk's limit for as many independent durable appends at a time",
        )
    };
    Ok(Contender::new(
        "raw",
        fsync_key(bytes, threads),
        workload,
        note,
        Box::new(move |_round, budget| {
            let syncs = || loops.iter().map(|l| lock(l).syncs).sum::<u64>();
            let before = syncs();
            let work = Work { events: 1, bytes: bytes as u64 };
            let m = measure(threads, budget, work, |i| {
                let l = loops.get(i).ok_or("no loop for this thread")?;
                Ok(move || lock(l).once())
            })?;
            Ok((m, Some(syncs() - before)))
        }),
    ))
}

/// The `write` loop without sync as a contender in the `Buffered` group of `per_write` 256-byte
/// events per append from `threads` sessions: as many threads, each on a file of its own.
pub fn unsynced_contender(
    dir: &Path,
    threads: usize,
    per_write: usize,
) -> Result<Contender, String> {
    let mut loops = Vec::with_capacity(threads);
    for i in 0..threads {
        let path = dir.join(format!("raw-write-{threads}-{per_write}-{i}"));
        loops.push(Mutex::new(FsyncLoop::unsynced(&path, 256, per_write)?));
    }
    let plural = if threads == 1 { "" } else { "s" };
    Ok(Contender::new(
        "raw",
        unsynced_key(threads, per_write),
        format!(
            "write without sync, 256-byte records, {per_write} per write, {threads} thread{plural}{}",
            if threads == 1 { "" } else { ", a file each" }
        ),
        &format!(
            "the operating system's limit for Buffered appends: written to the page cache, never \
             synced, over the same {} MiB of each file again and again; latency per write",
            RING >> 20
        ),
        Box::new(move |_round, budget| {
            let work = Work { events: per_write as u64, bytes: (256 * per_write) as u64 };
            let m = measure(threads, budget, work, |i| {
                let l = loops.get(i).ok_or("no loop for this thread")?;
                Ok(move || lock(l).once())
            })?;
            Ok((m, Some(0)))
        }),
    ))
}

fn lock(l: &Mutex<FsyncLoop>) -> std::sync::MutexGuard<'_, FsyncLoop> {
    l.lock().unwrap_or_else(|p| p.into_inner())
}

fn row(m: &Measured, bytes: usize, per_sync: usize, preallocate: bool, syncs: u64) -> Row {
    let kind = if preallocate { "prealloc" } else { "growing" };
    let file = if preallocate {
        "preallocated (1 MiB of zeros ahead, as the file backend does)"
    } else {
        "growing with every write"
    };
    Row::new(
        Section::Raw,
        format!("raw.fsync.{kind}.{bytes}.x{per_sync}"),
        "raw",
        format!("write + fdatasync, {bytes}-byte records, {kind}, {per_sync} per sync"),
        m.events_per_sec(),
        "records/s",
        m.elapsed.as_secs_f64(),
    )
    .mb(m.mb_per_sec())
    .latency(Latency::of(&m.latency))
    .fsyncs(Some(syncs as f64 / m.events.max(1) as f64))
    .vs_raw(Compare::rate_only(fsync_key(bytes, 1), 1.0))
    .vs_sqlite(Compare::rate_only(crate::plain::full_key(bytes, 1), 1.0))
    .note(format!("file {file}; latency per sync of {per_sync} record(s)"))
}

/// A `write` + `fdatasync` loop on one file (or, made by [`FsyncLoop::unsynced`], a `write` loop
/// without sync); `syncs` counts every `fdatasync` it made.
#[derive(Debug)]
pub struct FsyncLoop {
    file: File,
    path: PathBuf,
    batch: Vec<u8>,
    per_sync: usize,
    preallocate: bool,
    /// Whether each write is followed by an `fdatasync`.
    sync: bool,
    /// Where the writes start again from the beginning, if they do.
    ring: Option<u64>,
    /// Bytes of records written.
    len: u64,
    /// Bytes of the file that exist (records, then zeros): `len <= allocated`.
    allocated: u64,
    pub syncs: u64,
}

impl FsyncLoop {
    /// A new file at `path`; if `preallocate`, its first megabyte of zeros written and synced
    /// now, untimed, the way a file backend's segment is ready before its first append.
    pub fn create(
        path: &Path,
        record: usize,
        per_sync: usize,
        preallocate: bool,
    ) -> Result<FsyncLoop, String> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let mut f = FsyncLoop {
            file,
            path: path.to_path_buf(),
            batch: vec![0x5a; record * per_sync],
            per_sync,
            preallocate,
            sync: true,
            ring: None,
            len: 0,
            allocated: 0,
            syncs: 0,
        };
        if preallocate {
            f.extend()?;
        }
        Ok(f)
    }

    /// A loop of writes of `per_write` records without sync, over the first [`RING`] bytes of
    /// the file again and again; the file is filled with zeros first (not synced, not timed).
    pub fn unsynced(path: &Path, record: usize, per_write: usize) -> Result<FsyncLoop, String> {
        let mut f = FsyncLoop::create(path, record, per_write, false)?;
        let ring = RING.max(f.batch.len() as u64);
        let zeros = vec![0u8; ring as usize];
        f.file.write_all_at(&zeros, 0).map_err(|e| f.fail("writing zeros to", e))?;
        f.sync = false;
        f.ring = Some(ring);
        f.allocated = ring;
        Ok(f)
    }

    /// Another megabyte of zeros (or one batch's worth, if more) after the file's end, synced.
    fn extend(&mut self) -> Result<(), String> {
        let zeros = vec![0u8; PREALLOCATE.max(self.batch.len() as u64) as usize];
        self.file
            .write_all_at(&zeros, self.allocated)
            .map_err(|e| self.fail("writing zeros to", e))?;
        self.file.sync_data().map_err(|e| self.fail("fdatasync of", e))?;
        self.syncs += 1;
        self.allocated += zeros.len() as u64;
        Ok(())
    }

    fn fail(&self, what: &str, e: std::io::Error) -> String {
        format!("{what} {}: {e}", self.path.display())
    }

    /// One write of `per_sync` records, durable unless the loop is [`unsynced`](Self::unsynced);
    /// first, if the preallocated zeros run out, another megabyte of them, synced (as the file
    /// backend does, inside the append).
    pub fn once(&mut self) -> Result<(), String> {
        let n = self.batch.len() as u64;
        if self.ring.is_some_and(|ring| self.len + n > ring) {
            self.len = 0;
        }
        if self.preallocate && self.len + n > self.allocated {
            self.extend()?;
        }
        self.file.write_all_at(&self.batch, self.len).map_err(|e| self.fail("writing", e))?;
        if self.sync {
            self.file.sync_data().map_err(|e| self.fail("fdatasync of", e))?;
            self.syncs += 1;
        }
        self.len += n;
        self.allocated = self.allocated.max(self.len);
        Ok(())
    }

    /// Runs the loop for `budget`.
    pub fn run(&mut self, budget: Duration) -> Result<Measured, String> {
        let mut m = Measured::empty()?;
        let start = Instant::now();
        while start.elapsed() < budget {
            let t = Instant::now();
            self.once()?;
            let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
            m.latency.record(ns.max(1)).map_err(|e| e.to_string())?;
            m.appends += 1;
        }
        m.elapsed = start.elapsed();
        let work = Work { events: self.per_sync as u64, bytes: self.batch.len() as u64 };
        m.events = m.appends * work.events;
        m.bytes = m.appends * work.bytes;
        Ok(m)
    }
}

/// Reads `files` whole, in 4 MiB reads; returns the bytes read and the seconds taken.
pub fn read_files(files: &[PathBuf]) -> Result<(u64, f64), String> {
    let start = Instant::now();
    let mut buf = vec![0u8; 4 << 20];
    let mut total = 0u64;
    for f in files {
        let mut file = File::open(f).map_err(|e| format!("cannot open {}: {e}", f.display()))?;
        loop {
            let n = file.read(&mut buf).map_err(|e| format!("reading {}: {e}", f.display()))?;
            if n == 0 {
                break;
            }
            total += n as u64;
        }
    }
    Ok((total, start.elapsed().as_secs_f64()))
}

/// A sequential read row of `files`, keyed `key`.
pub fn read_row(key: &str, files: &[PathBuf], what: &str, cold: bool) -> Result<Row, String> {
    if cold {
        crate::cache::evict(files)?;
    }
    let (bytes, secs) = read_files(files)?;
    let cache = if cold { "cold" } else { "warm" };
    Ok(Row::new(
        Section::Raw,
        key,
        "raw",
        format!("sequential read of {what}, {cache} cache"),
        bytes as f64 / 1e9 / secs,
        "GB/s",
        secs,
    )
    .mb(bytes as f64 / 1e6 / secs)
    .note(format!(
        "{:.2} GB in 4 MiB reads; {}",
        bytes as f64 / 1e9,
        crate::cache::describe(cold)
    )))
}
