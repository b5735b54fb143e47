//! Reading a session's batches back by their index entries, for the store's reads and for
//! [`VerifyReport::read_session`](super::VerifyReport::read_session): batches of the session
//! that lie adjacent or nearly adjacent in one segment are read with one `pread` (see
//! [`next_span`]: the bytes of other sessions' batches read along never exceed a quarter of the
//! session's own), and each is checked against what the index says of it before its records are
//! handed on. Segment files come from the cache of open files, one at a
//! time, so a session spread over more segments than the process may open files still reads.

use std::io;
use std::path::Path;

use stepjournal_codec::batch::{Frame, FrameKind, HEADER_LEN as FRAME_HEADER_LEN};
use stepjournal_codec::record::RecordRef;
use stepjournal_codec::{DecodeError, Limits};

use super::files::SegmentFiles;
use super::format::layout::SegmentId;
use super::index::BatchLoc;
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
        let (j, start, end) = next_span(runs, i);
        let n = (end - start) as usize;
        // Grown only: zeroing it again for each longer span took 7% of a read in a profile.
        if buf.len() < n {
            buf.resize(n, 0);
        }
        let buf = buf.get_mut(..n).unwrap_or_default();
        let path = || dir.join(head.seg.file_name());
        file.read_exact_at(buf, start).map_err(|source| StoreError::Io {
            context: format!(
                "reading {} bytes at byte {start} of segment {}",
                end - start,
                path().display()
            ),
            source,
        })?;
        for run in runs.get(i..j).unwrap_or_default() {
            let at = (run.offset - start) as usize;
            let bytes = buf.get(at..at + run.len as usize).unwrap_or_default();
            check_batch(bytes, run, session, limits, &mut each).map_err(|source| {
                let context = format!("segment {} at byte {}", path().display(), run.offset);
                match source {
                    DecodeError::NewerVersion { .. } => StoreError::NewerFormat { context, source },
                    source => StoreError::Corrupt { context, source },
                }
            })?;
        }
        i = j;
    }
    Ok(())
}

/// The most bytes one read spans.
const MAX_SPAN: u64 = 1 << 20;

/// The span the read starting at `runs[i]` covers: `(j, start, end)`, the batches `runs[i..j]`
/// (at least one) read with one `pread` of the bytes `start..end` of their segment.
///
/// A batch joins the span only if it lies in the same segment after the last one, the span stays
/// within [`MAX_SPAN`], and the bytes between the span's batches (other sessions' batches, group
/// headers) stay at most a quarter of the span's own bytes. So every read, and the whole read of
/// a session, reads at most 1.25 times the bytes its batches occupy, whatever the layout: a
/// session interleaved with others is read batch by batch, one written alone in long runs with
/// few large reads.
fn next_span(runs: &[BatchLoc], i: usize) -> (usize, u64, u64) {
    let Some(head) = runs.get(i) else {
        return (i, 0, 0);
    };
    let start = head.offset;
    let mut end = head.offset + u64::from(head.len);
    let mut own = u64::from(head.len);
    let mut j = i + 1;
    while let Some(r) = runs.get(j) {
        if r.seg != head.seg || r.offset < end {
            break;
        }
        let r_end = r.offset + u64::from(r.len);
        let with = own + u64::from(r.len);
        let gaps = (r_end - start) - with;
        if r_end - start > MAX_SPAN || gaps * 4 > with {
            break;
        }
        own = with;
        end = r_end;
        j += 1;
    }
    (j, start, end)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seg: u64, offset: u64, len: u32) -> BatchLoc {
        BatchLoc { first: 0, count: 1, len, seg: SegmentId(seg), offset }
    }

    /// Every span of `runs`, as `(first batch, batches, bytes read)`.
    fn spans(runs: &[BatchLoc]) -> Vec<(usize, usize, u64)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < runs.len() {
            let (j, start, end) = next_span(runs, i);
            assert!(j > i, "a span holds at least one batch");
            out.push((i, j - i, end - start));
            i = j;
        }
        out
    }

    #[test]
    fn adjacent_batches_are_read_together() {
        // Batches of 1000 bytes, each after a 16-byte group header.
        let runs: Vec<_> = (0..10).map(|k| at(1, 32 + k * 1016, 1000)).collect();
        assert_eq!(spans(&runs), vec![(0, 10, 10 * 1016 - 16)]);
    }

    #[test]
    fn batches_interleaved_with_other_sessions_are_read_one_by_one() {
        // One batch in four is ours, as when four sessions append in turn.
        let runs: Vec<_> = (0..8).map(|k| at(1, 32 + k * 4 * 1016, 1000)).collect();
        let spans = spans(&runs);
        assert_eq!(spans.len(), 8);
        assert!(spans.iter().all(|&(_, n, bytes)| n == 1 && bytes == 1000));
    }

    #[test]
    fn a_small_gap_is_read_across_and_the_bytes_read_stay_within_a_quarter_more() {
        // Gaps of a quarter of a batch, then one gap too large to read across.
        let mut runs: Vec<_> = (0..4).map(|k| at(1, k * 1250, 1000)).collect();
        runs.push(at(1, 3 * 1250 + 1000 + 5000, 1000));
        let spans = spans(&runs);
        assert_eq!(spans, vec![(0, 4, 4750), (4, 1, 1000)]);
        let own: u64 = runs.iter().map(|r| u64::from(r.len)).sum();
        let read: u64 = spans.iter().map(|s| s.2).sum();
        assert!(read * 4 <= own * 5, "{read} bytes read for {own}");
    }

    #[test]
    fn a_span_ends_at_its_segment_and_at_the_most_one_read_spans() {
        let mut runs = vec![at(1, 32, 1000), at(2, 32, 1000)];
        assert_eq!(spans(&runs).len(), 2);
        runs = (0..3).map(|k| at(1, 32 + k * (400 << 10), 400 << 10)).collect();
        assert_eq!(spans(&runs), vec![(0, 2, 800 << 10), (2, 1, 400 << 10)]);
    }
}
