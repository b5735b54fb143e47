//! The binary form of one event: a self-describing, checksummed record.
//!
//! Layout, format version 1 (all integers little-endian; `docs/format.md` draws it):
//!
//! ```text
//! offset        size  field
//! 0             4     crc      CRC-32 (IEEE) of bytes [4, 8 + len): the length and the body
//! 4             4     len      length of the body that follows this field, in bytes
//! 8             1     version  record format version (1)
//! 9             1     kind     event kind code (EventKind)
//! 10            2     sid_len  length of the session id in bytes (1..=1024)
//! 12            8     seq      the event's sequence number in its session
//! 20            8     at       append time, unix milliseconds
//! 28            n     session  the session id, UTF-8
//! 28 + n        ...   payload  the event's fields, postcard 1.x, to the end of the body
//! ```
//!
//! The checksum covers the length, so a flipped length never passes for a torn tail. The session
//! and sequence number sit inside the checksummed bytes, so a misdirected or stale record is caught.

use std::mem::size_of;

use crate::event::{PayloadDecoder, PayloadEncoder};
use crate::wire::{self, FormatVersion};
use crate::{
    DecodeError, EncodeError, Event, EventKind, FormatPart, ModelAborted, RunEnded, RunStarted,
    Seq, SessionId, UnixMillis,
};

/// The record format version this build writes by default ([`FormatVersion::default`]); it
/// reads versions 1, 2 and 3.
pub const VERSION: u8 = 3;
/// Bytes before the body: `crc` and `len`.
pub const PREFIX_LEN: usize = size_of::<u32>() + size_of::<u32>();
/// Bytes of the body before the session id: `version`, `kind`, `sid_len`, `seq`, `at`.
pub const BODY_FIXED_LEN: usize =
    size_of::<u8>() + size_of::<u8>() + size_of::<u16>() + size_of::<u64>() + size_of::<u64>();
/// The smallest possible record: a one-byte session id and an empty payload.
pub const MIN_RECORD_LEN: usize = PREFIX_LEN + BODY_FIXED_LEN + 1;

/// What the codec is told: size bounds, checked on encode and decode, and the format version
/// encoders write. Defaults: records up to 16 MiB, batches up to 64 MiB, version 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest record, prefix included, in bytes. Default 16 MiB.
    pub max_record: u32,
    /// The largest batch frame, header included, in bytes. Default 64 MiB.
    pub max_batch: u32,
    /// The record format version written. Default [`FormatVersion::V5`]; an older one for a
    /// rolling deploy whose readers are not all upgraded yet (`docs/format.md`): version 2
    /// writes no `snapshot`, version 1 no metadata either. Decoding reads every version
    /// whatever this says.
    pub write_version: FormatVersion,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_record: 16 << 20, max_batch: 64 << 20, write_version: FormatVersion::V5 }
    }
}

/// One event with its place in the log: what a store holds and hands back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The session.
    pub session: SessionId,
    /// The position in the session's log.
    pub seq: Seq,
    /// When it was appended.
    pub at: UnixMillis,
    /// The event.
    pub event: Event,
}

/// An event with the time of its append: what a writer hands a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamped {
    /// When it is appended.
    pub at: UnixMillis,
    /// The event.
    pub event: Event,
}

impl Stamped {
    /// The event stamped with `at` (the codec reads no clock: the writer's clock gives `at`).
    pub fn at(at: UnixMillis, event: impl Into<Event>) -> Self {
        Stamped { at, event: event.into() }
    }
}

struct ToBuf<'a>(&'a mut Vec<u8>);

impl PayloadEncoder for ToBuf<'_> {
    type Output = Result<(), postcard::Error>;
    fn encode<T: serde::Serialize>(self, payload: &T) -> Self::Output {
        let buf = std::mem::take(self.0);
        *self.0 = postcard::to_extend(payload, buf)?;
        Ok(())
    }
}

struct FromSlice<'a>(&'a [u8]);

impl PayloadDecoder for FromSlice<'_> {
    type Error = postcard::Error;
    fn decode<T: serde::de::DeserializeOwned>(self) -> Result<T, postcard::Error> {
        let (value, rest) = postcard::take_from_bytes(self.0)?;
        if rest.is_empty() { Ok(value) } else { Err(postcard::Error::DeserializeBadEncoding) }
    }
}

/// Appends the record for `event` to `buf` and returns its length. On error `buf` is unchanged.
/// The session id must keep the rule ([`SessionId::validate`]), and so must a run id the event
/// names ([`RunId::validate`](crate::RunId::validate)) and an operator or continuation handle it
/// carries.
pub fn encode_into(
    buf: &mut Vec<u8>,
    session: &SessionId,
    seq: Seq,
    at: UnixMillis,
    event: &Event,
    limits: &Limits,
) -> Result<usize, EncodeError> {
    session.validate()?;
    check_run_id(event)?;
    encode_bounded_into(buf, session, seq, at, event, limits)
}

/// Refuses an event naming a run id that breaks the id rule ([`RunId::validate`](crate::RunId::validate)),
/// or carrying an operator or a continuation handle that breaks theirs
/// ([`Operator::validate`](crate::Operator::validate),
/// [`ContinuationId::validate`](crate::ContinuationId::validate)): what every append checks,
/// beside the session id.
pub(crate) fn check_run_id(event: &Event) -> Result<(), EncodeError> {
    match event {
        Event::RunStarted(RunStarted { run, by, .. })
        | Event::RunEnded(RunEnded { run, by, .. }) => {
            run.validate().map_err(EncodeError::Run)?;
            match by {
                Some(by) => by
                    .validate()
                    .map_err(|source| EncodeError::Member { kind: event.kind().name(), source }),
                None => Ok(()),
            }
        }
        Event::ModelAborted(ModelAborted { continuation: Some(c), .. }) => {
            c.validate().map_err(|source| EncodeError::Member { kind: event.kind().name(), source })
        }
        _ => Ok(()),
    }
}

/// [`encode_into`] checking only the bounds of the session id ([`SessionId::check_bounds`]),
/// not its rule: for a batch whose id was checked once for all its records, and for the frames
/// tests build.
pub(crate) fn encode_bounded_into(
    buf: &mut Vec<u8>,
    session: &SessionId,
    seq: Seq,
    at: UnixMillis,
    event: &Event,
    limits: &Limits,
) -> Result<usize, EncodeError> {
    session.check_bounds()?;
    let start = buf.len();
    let sid = session.as_str().as_bytes();
    let sid_len = u16::try_from(sid.len()).map_err(|_| {
        EncodeError::Session(crate::IdError::TooLong {
            what: "session id",
            len: sid.len(),
            max: SessionId::MAX_LEN,
        })
    })?;
    buf.extend_from_slice(&[0; PREFIX_LEN]);
    buf.push(limits.write_version.code());
    buf.push(event.kind().code());
    buf.extend_from_slice(&sid_len.to_le_bytes());
    buf.extend_from_slice(&seq.get().to_le_bytes());
    buf.extend_from_slice(&at.get().to_le_bytes());
    buf.extend_from_slice(sid);
    match wire::encode(event, limits.write_version, ToBuf(buf)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            buf.truncate(start);
            return Err(EncodeError::Payload { kind: event.kind().name(), reason: e.to_string() });
        }
        Err(e) => {
            buf.truncate(start);
            return Err(e);
        }
    }
    let total = buf.len() - start;
    if total > limits.max_record as usize {
        buf.truncate(start);
        return Err(EncodeError::RecordTooLarge {
            kind: event.kind().name(),
            len: total as u64,
            max: u64::from(limits.max_record),
        });
    }
    // total <= max_record, a u32, so the body length fits.
    let len = (total - PREFIX_LEN) as u32;
    let record = buf.get_mut(start..).unwrap_or_default();
    if let Some(field) = record.get_mut(4..8) {
        field.copy_from_slice(&len.to_le_bytes());
    }
    let crc = crc32fast::hash(record.get(4..).unwrap_or_default());
    if let Some(field) = record.get_mut(0..4) {
        field.copy_from_slice(&crc.to_le_bytes());
    }
    Ok(total)
}

/// Encodes one record into a new buffer.
pub fn encode(record: &Record, limits: &Limits) -> Result<Vec<u8>, EncodeError> {
    let mut buf = Vec::with_capacity(64);
    encode_into(&mut buf, &record.session, record.seq, record.at, &record.event, limits)?;
    Ok(buf)
}

/// A checked record still in its bytes: the header is read, the payload is not yet decoded.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    /// The event's kind.
    pub kind: EventKind,
    /// The session id's bytes (checked UTF-8).
    pub session: &'a str,
    /// The sequence number.
    pub seq: Seq,
    /// The append time.
    pub at: UnixMillis,
    /// The record's format version.
    pub version: FormatVersion,
    payload: &'a [u8],
    /// The whole record's bytes.
    pub bytes: &'a [u8],
}

fn read_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

pub(crate) fn truncated(needed: usize, available: usize) -> DecodeError {
    DecodeError::Truncated { needed: needed as u64, available: available as u64 }
}

/// Reads just the record prefix at the start of `bytes`: the length of the whole record, prefix
/// included, checked against the limits but not the checksum. For readers stepping over a
/// damaged record to the next.
pub fn peek_len(bytes: &[u8], limits: &Limits) -> Result<usize, DecodeError> {
    let len =
        read_u32(bytes, size_of::<u32>()).ok_or_else(|| truncated(PREFIX_LEN, bytes.len()))?;
    let total = PREFIX_LEN as u64 + u64::from(len);
    if total > u64::from(limits.max_record) {
        return Err(DecodeError::TooLarge { len: total, max: u64::from(limits.max_record) });
    }
    // total <= max_record (a u32): it fits in usize.
    Ok(total as usize)
}

/// The session and sequence number the record header at the start of `bytes` names, read
/// without checking the checksum: `None` when the bytes are too short, or the session id is
/// empty or not UTF-8. For readers locating damage, who trust it only where the checksum passed
/// or other evidence agrees.
pub fn peek_place(bytes: &[u8]) -> Option<(&str, Seq)> {
    let body = bytes.get(PREFIX_LEN..)?;
    let sid_len = usize::from(read_u16(body, 2)?);
    let seq = Seq(read_u64(body, 4)?);
    let sid = std::str::from_utf8(body.get(BODY_FIXED_LEN..BODY_FIXED_LEN + sid_len)?).ok()?;
    (!sid.is_empty()).then_some((sid, seq))
}

impl<'a> RecordRef<'a> {
    /// Checks the record at the start of `bytes`: length bound, checksum, version, kind, session
    /// id. Returns the record and the number of bytes it spans. The payload is not decoded.
    pub fn parse(bytes: &'a [u8], limits: &Limits) -> Result<(Self, usize), DecodeError> {
        let stored = read_u32(bytes, 0).ok_or_else(|| truncated(PREFIX_LEN, bytes.len()))?;
        let total = peek_len(bytes, limits)?;
        let record = bytes.get(..total).ok_or_else(|| truncated(total, bytes.len()))?;
        let computed = crc32fast::hash(record.get(4..).unwrap_or_default());
        if computed != stored {
            return Err(DecodeError::ChecksumMismatch { stored, computed });
        }
        let body = record.get(PREFIX_LEN..).unwrap_or_default();
        if body.len() < BODY_FIXED_LEN {
            return Err(DecodeError::Malformed {
                reason: format!("record body of {} bytes is shorter than its header", body.len()),
            });
        }
        let code = body.first().copied().unwrap_or(0);
        let newest = FormatVersion::NEWEST.code();
        let version = FormatVersion::from_code(code).ok_or(if code > newest {
            DecodeError::NewerVersion {
                part: FormatPart::Record,
                version: u16::from(code),
                newest: u16::from(newest),
            }
        } else {
            DecodeError::UnknownVersion { version: code }
        })?;
        let code = body.get(1).copied().unwrap_or(0);
        let kind = EventKind::from_code(code).ok_or(DecodeError::UnknownKind { code })?;
        if kind.since() > version {
            return Err(DecodeError::Malformed {
                reason: format!(
                    "a {kind} record in format version {}: the type needs version {}",
                    version.code(),
                    kind.since().code()
                ),
            });
        }
        let malformed = |reason: &str| DecodeError::Malformed { reason: reason.to_owned() };
        let sid_len = usize::from(read_u16(body, 2).ok_or_else(|| malformed("no session length"))?);
        let seq = Seq(read_u64(body, 4).ok_or_else(|| malformed("no sequence number"))?);
        let at = UnixMillis(read_u64(body, 12).ok_or_else(|| malformed("no append time"))?);
        if sid_len == 0 || sid_len > SessionId::MAX_LEN {
            return Err(DecodeError::Malformed {
                reason: format!(
                    "session id length {sid_len} is outside 1..={}",
                    SessionId::MAX_LEN
                ),
            });
        }
        let sid = body
            .get(BODY_FIXED_LEN..BODY_FIXED_LEN + sid_len)
            .ok_or_else(|| malformed("session id runs past the record"))?;
        let session = std::str::from_utf8(sid).map_err(|_| malformed("session id is not UTF-8"))?;
        let payload = body.get(BODY_FIXED_LEN + sid_len..).unwrap_or_default();
        Ok((RecordRef { kind, session, seq, at, version, payload, bytes: record }, total))
    }

    /// Decodes the payload into an event.
    pub fn event(&self) -> Result<Event, DecodeError> {
        wire::decode(self.kind, self.version, FromSlice(self.payload)).map_err(|e| {
            DecodeError::Malformed { reason: format!("{} payload: {e}", self.kind.name()) }
        })
    }

    /// Decodes the whole record.
    pub fn to_record(&self) -> Result<Record, DecodeError> {
        Ok(Record {
            session: SessionId::from_stored(self.session),
            seq: self.seq,
            at: self.at,
            event: self.event()?,
        })
    }
}

/// Decodes the record at the start of `bytes`; returns it and the bytes it spans.
pub fn decode(bytes: &[u8], limits: &Limits) -> Result<(Record, usize), DecodeError> {
    let (r, len) = RecordRef::parse(bytes, limits)?;
    Ok((r.to_record()?, len))
}
