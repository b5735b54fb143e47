//! okaywal, the peer: a Rust write-ahead log with group commit (one active file; writers take
//! turns writing their entry, and a commit returns once an `fdatasync` that covers it returned,
//! one sync serving every entry written while the previous one ran). Each append is one entry of
//! one chunk, the same record bytes the file backend writes for the event (encoded per append, as
//! the file backend encodes it), committed: as durable as a `Synced` append.
//!
//! Set up as its authors ship it ([`okaywal::Configuration::default_for`]): log files
//! preallocated with 1 MiB of zeros (the file backend's step too), a new file after 768 KiB, the
//! directory synced when a file is made or renamed. A filled file is checkpointed by okaywal's
//! own thread through the [`okaywal::LogManager`]; the bench's, [`okaywal::LogVoid`], keeps
//! nothing, so no row pays for moving checkpointed entries elsewhere.

use std::path::Path;

use okaywal::{Configuration, LogVoid};
use stepjournal_codec::{Limits, Seq, record};

use crate::appends::{Work, event, measure, session};
use crate::turns::Contender;

/// The key of okaywal's row for `bytes`-byte entries from `threads` threads.
pub fn key(bytes: usize, threads: usize) -> String {
    format!("okaywal.{bytes}.{threads}")
}

/// okaywal in the synced group of `bytes`-byte events from `threads` threads, each committing
/// one entry per append.
pub fn contender(dir: &Path, bytes: usize, threads: usize) -> Result<Contender, String> {
    let path = dir.join("okaywal");
    let wal = Configuration::default_for(&path)
        .open(LogVoid)
        .map_err(|e| format!("okaywal: opening {}: {e}", path.display()))?;
    let ev = event(bytes);
    let kept = wal.clone();
    let plural = if threads == 1 { "" } else { "s" };
    let contender = Contender::new(
        "okaywal",
        key(bytes, threads),
        format!("commit of one {bytes}-byte entry per append, {threads} thread{plural}"),
        "one entry of one chunk per append, committed (fdatasync before it returns); 1 MiB \
         preallocated files, a new one after 768 KiB (its defaults)",
        Box::new(move |round, budget| {
            let work = Work { events: 1, bytes: bytes as u64 };
            let m = measure(threads, budget, work, |i| {
                let s = session(round, i);
                let (wal, ev) = (&wal, &ev);
                let limits = Limits::default();
                let mut buf = Vec::with_capacity(bytes);
                let mut seq = 0u64;
                Ok(move || {
                    buf.clear();
                    record::encode_into(&mut buf, &s, Seq(seq), ev.at, &ev.event, &limits)
                        .map_err(|e| format!("okaywal: encoding: {e}"))?;
                    let mut entry = wal.begin_entry().map_err(|e| format!("okaywal: {e}"))?;
                    entry.write_chunk(&buf).map_err(|e| format!("okaywal: writing: {e}"))?;
                    entry.commit().map_err(|e| format!("okaywal: committing: {e}"))?;
                    seq += 1;
                    Ok(())
                })
            })?;
            Ok((m, None))
        }),
    );
    Ok(contender.finish(Box::new(move || {
        // Waits for its checkpoint thread, once the slices' handle is dropped.
        kept.shutdown().map_err(|e| format!("okaywal: shutting down: {e}"))
    })))
}
