//! Reading a session's batches back by their index entries, for the store's reads and for
//! [`VerifyReport::read_session`](super::VerifyReport::read_session): batches close together in
//! one segment are read with one `pread`, and each is checked against what the index says of it
//! before its records are handed on. Segment files come from the cache of open files, one at a
//! time, so a session spread over more segments than the process may open files still reads.

use std::io;
use std::path::Path;

use stepjournal_codec::batch::{Frame, FrameKind, HEADER_LEN as FRAME_HEADER_LEN};
use stepjournal_codec::record::RecordRef;
use stepjournal_codec::{DecodeError, Limits};

use super::files::SegmentFiles;
use super::index::BatchLoc;
use super::layout::SegmentId;
use crate::StoreError;

/// Why a read stopped.
#[derive(Debug)]
pub(crate) enum ReadFailure {
    /// A segment the index names is gone: removed (its batches moved by compaction) after the
    /// index was read.
    Gone { seg: SegmentId, source: io::Error },
    /// The bytes could not be read, or are damaged.
    Store(StoreError),
}

impl From<StoreError> for ReadFailure {
    fn from(e: StoreError) -> Self {
        ReadFailure::Store(e)
    }
}

/// Reads `runs` (batches of `session` in order) from the journal in `dir`, through `files`,
/// handing each record, with its batch and its offset in the segment, to `each`.
pub(crate) fn read_batches(
    dir: &Path,
    files: &SegmentFiles,
    limits: &Limits,
    session: &str,
    runs: &[BatchLoc],
    mut each: impl FnMut(&BatchLoc, RecordRef<'_>, u64) -> Result<(), DecodeError>,
) -> Result<(), ReadFailure> {
    /// The most bytes between two batches read together.
    const MAX_GAP: u64 = 64 << 10;
    /// The most bytes one read spans.
    const MAX_SPAN: u64 = 1 << 20;
    let mut buf = Vec::new();
    let mut i = 0;
    let mut open = None;
    while let Some(head) = runs.get(i) {
        let file = match &open {
            Some((seg, file)) if *seg == head.seg => std::sync::Arc::clone(file),
            _ => {
                let file = files.get(head.seg).map_err(|source| {
                    if source.kind() == io::ErrorKind::NotFound {
                        return ReadFailure::Gone { seg: head.seg, source };
                    }
                    let path = dir.join(head.seg.file_name());
                    let context = format!("opening segment {}", path.display());
                    ReadFailure::Store(StoreError::Io { context, source })
                })?;
                open = Some((head.seg, std::sync::Arc::clone(&file)));
                file
            }
        };
        let start = head.offset;
        let mut end = head.offset + u64::from(head.len);
        let mut j = i + 1;
        while let Some(r) = runs.get(j) {
            let r_end = r.offset + u64::from(r.len);
            if r.seg != head.seg
                || r.offset < end
                || r.offset - end > MAX_GAP
                || r_end - start > MAX_SPAN
            {
                break;
            }
            end = r_end;
            j += 1;
        }
        buf.resize((end - start) as usize, 0);
        let path = dir.join(head.seg.file_name());
        file.read_exact_at(&mut buf, start).map_err(|source| StoreError::Io {
            context: format!(
                "reading {} bytes at byte {start} of segment {}",
                end - start,
                path.display()
            ),
            source,
        })?;
        for run in runs.get(i..j).unwrap_or_default() {
            let at = (run.offset - start) as usize;
            let bytes = buf.get(at..at + run.len as usize).unwrap_or_default();
            check_batch(bytes, run, session, limits, &mut each).map_err(|source| {
                StoreError::Corrupt {
                    context: format!("segment {} at byte {}", path.display(), run.offset),
                    source,
                }
            })?;
        }
        i = j;
    }
    Ok(())
}

/// Checks one batch's bytes against what the index says of them (one events frame of `count`
/// records of `session` from `first`, exactly filling its bytes) and hands each record on.
fn check_batch(
    bytes: &[u8],
    run: &BatchLoc,
    session: &str,
    limits: &Limits,
    each: &mut impl FnMut(&BatchLoc, RecordRef<'_>, u64) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let (frame, len) = Frame::parse(bytes, limits)?;
    if frame.kind != FrameKind::Events || frame.count != run.count || len != bytes.len() {
        return Err(DecodeError::Malformed {
            reason: format!(
                "the index expects a batch of {} events of {session} from seq {}",
                run.count, run.first
            ),
        });
    }
    let mut at = run.offset + FRAME_HEADER_LEN as u64;
    for (i, r) in frame.records().enumerate() {
        let r = r?;
        let expected = run.first.checked_add(i as u64);
        if r.session != session || Some(r.seq.get()) != expected {
            return Err(DecodeError::Malformed {
                reason: format!(
                    "misdirected record: expected {session} seq {}, found {} seq {}",
                    run.first.saturating_add(i as u64),
                    r.session,
                    r.seq
                ),
            });
        }
        let n = r.bytes.len() as u64;
        each(run, r, at)?;
        at += n;
    }
    Ok(())
}
