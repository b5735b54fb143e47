//! The batch frame: the records of one append, landing or dropped as one unit.
//!
//! Layout, format version 1 (little-endian; `docs/format.md` draws it):
//!
//! ```text
//! offset  size  field
//! 0       4     crc    CRC-32 (IEEE) of bytes [4, 16 + len): the header fields and the body
//! 4       4     len    length of the body that follows the header, in bytes
//! 8       4     count  number of records in the body (0 for a deletion)
//! 12      2     kind   1 = events: the body is `count` records back to back (see `record`),
//!                      each with its own checksum;
//!                      2 = session deleted: the body is the session id (UTF-8), count 0
//! 14      2     reserved, 0
//! 16      len   body
//! ```
//!
//! A torn batch fails its checksum (or is truncated) and is dropped whole by the reader that
//! decides what a torn tail is; every record inside is also a standalone record, so a store that
//! keeps one row per event (SQLite, PostgreSQL) keeps the same bytes.

use std::mem::size_of;

use crate::record::{self, RecordRef, truncated};
use crate::{DecodeError, EncodeError, Limits, Record, Seq, SessionId, Stamped};

/// Bytes of the frame header: `crc`, `len`, `count`, `kind`, `reserved`.
pub const HEADER_LEN: usize = size_of::<u32>() * 3 + size_of::<u16>() * 2;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum FrameKind {
    /// One append's records.
    Events = 1,
    /// A session's deletion: every earlier frame of the session stops counting.
    DeleteSession = 2,
}

impl FrameKind {
    fn from_code(code: u16) -> Option<Self> {
        match code {
            1 => Some(FrameKind::Events),
            2 => Some(FrameKind::DeleteSession),
            _ => None,
        }
    }
}

/// Appends a batch frame holding `events` at `first`, `first + 1`, ... of `session` to `buf`.
/// The session id must keep the rule ([`SessionId::validate`]), and so must every run id the
/// events name. Returns the frame's length. On
/// error `buf` is unchanged; an empty `events` is refused
/// ([`EncodeError::EmptyBatch`]), as [`Frame::parse`] refuses an events frame with no record.
pub fn encode_into(
    buf: &mut Vec<u8>,
    session: &SessionId,
    first: Seq,
    events: &[Stamped],
    limits: &Limits,
) -> Result<usize, EncodeError> {
    if events.is_empty() {
        return Err(EncodeError::EmptyBatch);
    }
    session.validate()?;
    for e in events {
        record::check_run_id(&e.event)?;
    }
    let start = buf.len();
    buf.extend_from_slice(&[0; HEADER_LEN]);
    for (i, e) in events.iter().enumerate() {
        let seq = first.add(i as u64);
        if let Err(e) = record::encode_bounded_into(buf, session, seq, e.at, &e.event, limits) {
            buf.truncate(start);
            return Err(e);
        }
    }
    finish(buf, start, events.len(), FrameKind::Events, limits)
}

/// Appends a frame recording that `session` was deleted. Only the bounds of the id are checked
/// ([`SessionId::check_bounds`]): a session stored before the session-id rule can be deleted.
pub fn encode_delete_into(
    buf: &mut Vec<u8>,
    session: &SessionId,
    limits: &Limits,
) -> Result<usize, EncodeError> {
    session.check_bounds()?;
    let start = buf.len();
    buf.extend_from_slice(&[0; HEADER_LEN]);
    buf.extend_from_slice(session.as_str().as_bytes());
    finish(buf, start, 0, FrameKind::DeleteSession, limits)
}

/// Appends a batch frame holding already-placed records (their own session, seq and time).
/// An empty `records` is refused ([`EncodeError::EmptyBatch`]), as in [`encode_into`].
///
/// For tests, which build frames a writer never would (records of several sessions, out of
/// sequence, or under session ids that break the rule, as journals written before it may hold:
/// only the ids' bounds are checked); not part of the supported API.
#[doc(hidden)]
pub fn encode_records_into(
    buf: &mut Vec<u8>,
    records: &[Record],
    limits: &Limits,
) -> Result<usize, EncodeError> {
    if records.is_empty() {
        return Err(EncodeError::EmptyBatch);
    }
    let start = buf.len();
    buf.extend_from_slice(&[0; HEADER_LEN]);
    for r in records {
        if let Err(e) = record::encode_bounded_into(buf, &r.session, r.seq, r.at, &r.event, limits)
        {
            buf.truncate(start);
            return Err(e);
        }
    }
    finish(buf, start, records.len(), FrameKind::Events, limits)
}

fn finish(
    buf: &mut Vec<u8>,
    start: usize,
    count: usize,
    kind: FrameKind,
    limits: &Limits,
) -> Result<usize, EncodeError> {
    let total = buf.len() - start;
    if total > limits.max_batch as usize || count > u32::MAX as usize {
        buf.truncate(start);
        return Err(EncodeError::BatchTooLarge {
            len: total as u64,
            max: u64::from(limits.max_batch),
        });
    }
    let frame = buf.get_mut(start..).unwrap_or_default();
    // total <= max_batch (a u32).
    let len = (total - HEADER_LEN) as u32;
    if let Some(f) = frame.get_mut(4..8) {
        f.copy_from_slice(&len.to_le_bytes());
    }
    if let Some(f) = frame.get_mut(8..12) {
        f.copy_from_slice(&(count as u32).to_le_bytes());
    }
    if let Some(f) = frame.get_mut(12..14) {
        f.copy_from_slice(&(kind as u16).to_le_bytes());
    }
    let crc = crc32fast::hash(frame.get(4..).unwrap_or_default());
    if let Some(f) = frame.get_mut(0..4) {
        f.copy_from_slice(&crc.to_le_bytes());
    }
    Ok(total)
}

/// A checked batch frame still in its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// What it carries.
    pub kind: FrameKind,
    /// How many records it holds (0 for a deletion).
    pub count: u32,
    body: &'a [u8],
    limits: Limits,
}

/// Reads just the frame header at the start of `bytes`: `(len of the whole frame, count)`, checked
/// against the limits but not the checksum. For readers that must fetch the frame's bytes first.
pub fn peek_len(bytes: &[u8], limits: &Limits) -> Result<(usize, u32), DecodeError> {
    let header = bytes.get(..HEADER_LEN).ok_or_else(|| truncated(HEADER_LEN, bytes.len()))?;
    let word = |i: usize| {
        header.get(i..i + 4).and_then(|w| w.try_into().ok()).map(u32::from_le_bytes).unwrap_or(0)
    };
    let total = HEADER_LEN as u64 + u64::from(word(4));
    if total > u64::from(limits.max_batch) {
        return Err(DecodeError::TooLarge { len: total, max: u64::from(limits.max_batch) });
    }
    Ok((total as usize, word(8)))
}

impl<'a> Frame<'a> {
    /// Checks the frame at the start of `bytes` (bounds and checksum); returns it and its length.
    /// The records inside are checked as they are iterated.
    pub fn parse(bytes: &'a [u8], limits: &Limits) -> Result<(Self, usize), DecodeError> {
        let (total, count) = peek_len(bytes, limits)?;
        let frame = bytes.get(..total).ok_or_else(|| truncated(total, bytes.len()))?;
        let stored =
            frame.get(0..4).and_then(|w| w.try_into().ok()).map(u32::from_le_bytes).unwrap_or(0);
        let computed = crc32fast::hash(frame.get(4..).unwrap_or_default());
        if stored != computed {
            return Err(DecodeError::ChecksumMismatch { stored, computed });
        }
        let body = frame.get(HEADER_LEN..).unwrap_or_default();
        let word16 = |i: usize| {
            frame.get(i..i + 2).and_then(|w| w.try_into().ok()).map(u16::from_le_bytes).unwrap_or(0)
        };
        let code = word16(12);
        let kind = FrameKind::from_code(code).ok_or_else(|| DecodeError::Malformed {
            reason: format!("unknown frame kind {code}"),
        })?;
        if word16(14) != 0 {
            return Err(DecodeError::Malformed { reason: "reserved frame bits are set".into() });
        }
        let fits = match kind {
            FrameKind::Events => {
                count > 0 && (count as usize).saturating_mul(record::MIN_RECORD_LEN) <= body.len()
            }
            FrameKind::DeleteSession => {
                count == 0
                    && !body.is_empty()
                    && body.len() <= SessionId::MAX_LEN
                    && std::str::from_utf8(body).is_ok()
            }
        };
        if !fits {
            return Err(DecodeError::Malformed {
                reason: format!(
                    "a {kind:?} frame of {} bytes cannot hold {count} records",
                    body.len()
                ),
            });
        }
        Ok((Frame { kind, count, body, limits: *limits }, total))
    }

    /// The session a [`FrameKind::DeleteSession`] frame deletes (None for other frames).
    pub fn deleted_session(&self) -> Option<&'a str> {
        match self.kind {
            FrameKind::DeleteSession => std::str::from_utf8(self.body).ok(),
            FrameKind::Events => None,
        }
    }

    /// The records, each checked in turn. The iterator ends after an error. A deletion frame has
    /// none.
    pub fn records(&self) -> FrameRecords<'a> {
        let rest = match self.kind {
            FrameKind::Events => self.body,
            FrameKind::DeleteSession => &[],
        };
        FrameRecords { rest, left: self.count, limits: self.limits, failed: false }
    }

    /// Checks every record and that they fill the frame exactly; decodes them all.
    pub fn decode_all(&self) -> Result<Vec<Record>, DecodeError> {
        let mut out = Vec::with_capacity(self.count as usize);
        for r in self.records() {
            out.push(r?.to_record()?);
        }
        Ok(out)
    }
}

/// The records of a frame, in order.
#[derive(Debug)]
pub struct FrameRecords<'a> {
    rest: &'a [u8],
    left: u32,
    limits: Limits,
    failed: bool,
}

impl<'a> Iterator for FrameRecords<'a> {
    type Item = Result<RecordRef<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.left == 0 {
            if self.rest.is_empty() {
                return None;
            }
            self.failed = true;
            return Some(Err(DecodeError::Malformed {
                reason: format!("{} bytes follow the batch's last record", self.rest.len()),
            }));
        }
        match RecordRef::parse(self.rest, &self.limits) {
            Ok((r, len)) => {
                self.rest = self.rest.get(len..).unwrap_or_default();
                self.left -= 1;
                Some(Ok(r))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Decodes the frame at the start of `bytes`: its records and the bytes it spans.
pub fn decode(bytes: &[u8], limits: &Limits) -> Result<(Vec<Record>, usize), DecodeError> {
    let (frame, len) = Frame::parse(bytes, limits)?;
    Ok((frame.decode_all()?, len))
}
