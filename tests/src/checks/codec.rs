//! The record and batch decoders on arbitrary bytes.
//!
//! Each input is read as a stream (record after record, frame after frame, as a log reader
//! would), under the default limits and under small ones, once as given and once *resealed*:
//! with every checksum recomputed, so that the payload decoder behind the checksums is reached
//! too. Whatever decodes must agree between the decoder's entry points and survive a round trip
//! through the binary and the JSON forms.

use stepjournal_codec::batch::{self, Frame, FrameKind};
use stepjournal_codec::record::{self, RecordRef};
use stepjournal_codec::{Limits, Record, SessionId, json};

use super::{ensure, le_u32, put_u32};

/// Limits small enough that an input can cross them.
pub const SMALL_LIMITS: Limits = Limits {
    max_record: 4096,
    max_batch: 16384,
    write_version: stepjournal_codec::FormatVersion::V3,
};

fn both_limits() -> [Limits; 2] {
    [Limits::default(), SMALL_LIMITS]
}

/// Decodes `data` as records back to back: no panic; every record that decodes round-trips.
pub fn check_record_bytes(data: &[u8]) -> Result<(), String> {
    for limits in both_limits() {
        record_stream(data, &limits)?;
        let mut sealed = data.to_vec();
        if reseal_records(&mut sealed, 0, usize::MAX) > 0 {
            record_stream(&sealed, &limits)?;
        }
    }
    Ok(())
}

/// Decodes `data` as batch frames back to back: no panic; every frame that decodes agrees with
/// its records and round-trips.
pub fn check_batch_bytes(data: &[u8]) -> Result<(), String> {
    for limits in both_limits() {
        frame_stream(data, &limits)?;
        let mut sealed = data.to_vec();
        if reseal_frames(&mut sealed) > 0 {
            frame_stream(&sealed, &limits)?;
        }
    }
    Ok(())
}

fn record_stream(data: &[u8], limits: &Limits) -> Result<(), String> {
    let mut at = 0usize;
    while let Some(rest) = data.get(at..).filter(|r| !r.is_empty()) {
        match one_record(rest, limits).map_err(|e| format!("record at byte {at}: {e}"))? {
            Some(len) => at += len,
            None => break,
        }
    }
    Ok(())
}

/// Checks the record at the start of `bytes`; its length when it decodes.
fn one_record(bytes: &[u8], limits: &Limits) -> Result<Option<usize>, String> {
    let parsed = RecordRef::parse(bytes, limits);
    let decoded = record::decode(bytes, limits);
    match (parsed, decoded) {
        (Err(a), Err(b)) => {
            ensure!(a == b, "parse says {a:?}, decode says {b:?}");
            Ok(None)
        }
        (Err(a), Ok(_)) => Err(format!("parse refused ({a:?}) what decode accepted")),
        (Ok((r, _)), Err(b)) => match r.event() {
            Ok(e) => Err(format!("decode refused ({b:?}) a record whose event decodes: {e:?}")),
            Err(a) => {
                ensure!(a == b, "the payload error {a:?} differs from decode's {b:?}");
                Ok(None)
            }
        },
        (Ok((r, len)), Ok((rec, used))) => {
            ensure!(len == used, "parse spans {len} bytes, decode {used}");
            ensure!(used <= bytes.len(), "a record of {used} bytes in {} bytes", bytes.len());
            ensure!(used >= record::MIN_RECORD_LEN, "a record of only {used} bytes");
            ensure!(used as u64 <= u64::from(limits.max_record), "a record past the limit");
            ensure!(r.bytes.len() == used, "the record's bytes are not what it spans");
            ensure!(
                rec.session.as_str() == r.session && rec.seq == r.seq && rec.at == r.at,
                "parse and decode disagree on the record's place"
            );
            ensure!(rec.event.kind() == r.kind, "parse and decode disagree on the kind");
            record_round_trips(&rec, limits)?;
            Ok(Some(used))
        }
    }
}

/// A decoded record encodes again, decodes to itself, and prints and reads back as JSON.
pub(crate) fn record_round_trips(rec: &Record, limits: &Limits) -> Result<(), String> {
    // A writer encodes only records whose session id keeps the rule; a stored one that breaks
    // it still encodes through the bounds-only path tests use, to the same bytes.
    let kept = rec.session.validate().is_ok();
    match record::encode(rec, limits) {
        Ok(bytes) => {
            ensure!(kept, "a record under the id {:?} that breaks the rule encodes", rec.session);
            let (back, used) = record::decode(&bytes, limits)
                .map_err(|e| format!("a re-encoded record does not decode: {e}"))?;
            ensure!(
                used == bytes.len(),
                "the re-encoded record spans {used} of {} bytes",
                bytes.len()
            );
            ensure!(&back == rec, "binary round trip changed {rec:?} into {back:?}");
        }
        Err(e) => ensure!(!kept, "a decoded record does not encode again: {e}"),
    }
    let mut frame = Vec::new();
    batch::encode_records_into(&mut frame, std::slice::from_ref(rec), limits)
        .map_err(|e| format!("a decoded record does not encode again in a frame: {e}"))?;
    let (back, used) = batch::decode(&frame, limits)
        .map_err(|e| format!("a re-encoded frame does not decode: {e}"))?;
    ensure!(
        used == frame.len() && back.as_slice() == std::slice::from_ref(rec),
        "frame round trip changed {rec:?}"
    );
    let line = json::record_to_export_line(rec);
    ensure!(!line.contains('\n'), "an export line spans lines: {line}");
    let from_line = json::record_from_export_line(&line)
        .map_err(|e| format!("the export line {line} does not read back: {e}"))?;
    ensure!(&from_line == rec, "JSON round trip changed {rec:?} into {from_line:?}");
    let text = json::event_to_json(&rec.event);
    let event = json::parse_event(&text)
        .map_err(|e| format!("the event's JSON {text} does not read back: {e}"))?;
    ensure!(event == rec.event, "event JSON round trip changed {text}");
    Ok(())
}

fn frame_stream(data: &[u8], limits: &Limits) -> Result<(), String> {
    let mut at = 0usize;
    while let Some(rest) = data.get(at..).filter(|r| !r.is_empty()) {
        match one_frame(rest, limits).map_err(|e| format!("frame at byte {at}: {e}"))? {
            Some(len) => at += len,
            None => break,
        }
    }
    Ok(())
}

/// Checks the frame at the start of `bytes`; its length when it parses.
fn one_frame(bytes: &[u8], limits: &Limits) -> Result<Option<usize>, String> {
    let peek = batch::peek_len(bytes, limits);
    let decoded = batch::decode(bytes, limits);
    let (frame, len) = match Frame::parse(bytes, limits) {
        Ok(ok) => ok,
        Err(e) => {
            ensure!(decoded.as_ref().err() == Some(&e), "parse says {e:?}, decode {decoded:?}");
            return Ok(None);
        }
    };
    ensure!(
        peek.as_ref().ok() == Some(&(len, frame.count)),
        "peek_len says {peek:?}, the frame spans {len} bytes with {} records",
        frame.count
    );
    ensure!((batch::HEADER_LEN..=bytes.len()).contains(&len), "a frame of {len} bytes");
    ensure!(len as u64 <= u64::from(limits.max_batch), "a frame past the limit");
    match frame.kind {
        FrameKind::Events => {
            ensure!(frame.deleted_session().is_none(), "an events frame names a deletion");
            let mut records = Vec::new();
            let mut failure = None;
            for (i, r) in frame.records().enumerate() {
                ensure!(i <= frame.count as usize, "the records run past the frame's count");
                match r.and_then(|r| r.to_record()) {
                    Ok(rec) => records.push(rec),
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            match (failure, decoded) {
                (Some(a), Err(b)) => ensure!(a == b, "records say {a:?}, decode says {b:?}"),
                (Some(a), Ok(_)) => return Err(format!("decode accepted a bad record: {a:?}")),
                (None, Err(b)) => return Err(format!("decode refused ({b:?}) good records")),
                (None, Ok((all, used))) => {
                    ensure!(used == len, "decode spans {used} bytes, parse {len}");
                    ensure!(all == records, "decode and the iterator disagree");
                    let count = frame.count as usize;
                    ensure!(all.len() == count, "{} records of {count}", all.len());
                    frame_round_trips(&all, limits)?;
                }
            }
        }
        FrameKind::DeleteSession => {
            ensure!(frame.count == 0, "a deletion with {} records", frame.count);
            ensure!(frame.records().next().is_none(), "a deletion yields records");
            let session = frame.deleted_session().ok_or("a deletion that names no session")?;
            ensure!(
                !session.is_empty() && session.len() <= SessionId::MAX_LEN,
                "a deletion of a session id of {} bytes",
                session.len()
            );
            match decoded {
                Ok((records, used)) => {
                    ensure!(records.is_empty() && used == len, "decode of a deletion: {used}")
                }
                Err(e) => return Err(format!("decode refused a deletion frame: {e:?}")),
            }
            let mut again = Vec::new();
            batch::encode_delete_into(&mut again, &SessionId::from_stored(session), limits)
                .map_err(|e| format!("a decoded deletion does not encode again: {e}"))?;
            ensure!(
                Some(again.as_slice()) == bytes.get(..len),
                "a deletion frame is not the one its session encodes to"
            );
        }
    }
    Ok(Some(len))
}

fn frame_round_trips(records: &[Record], limits: &Limits) -> Result<(), String> {
    let mut buf = Vec::new();
    batch::encode_records_into(&mut buf, records, limits)
        .map_err(|e| format!("decoded records do not encode again as a frame: {e}"))?;
    let (back, used) = batch::decode(&buf, limits)
        .map_err(|e| format!("a re-encoded frame does not decode: {e}"))?;
    ensure!(used == buf.len() && back == records, "a frame's round trip changed it");
    for rec in records {
        record_round_trips(rec, limits)?;
    }
    Ok(())
}

/// Recomputes the checksum of every record found walking `buf[from..to]` by its length fields;
/// returns how many were resealed.
pub(crate) fn reseal_records(buf: &mut [u8], from: usize, to: usize) -> usize {
    let end = to.min(buf.len());
    let mut at = from;
    let mut sealed = 0;
    while at + record::PREFIX_LEN <= end {
        let Some(len) = le_u32(buf, at + 4) else { break };
        let Some(total) = (len as usize).checked_add(record::PREFIX_LEN) else { break };
        if at + total > end {
            break;
        }
        let crc = buf.get(at + 4..at + total).map(crc32fast::hash).unwrap_or(0);
        put_u32(buf, at, crc);
        sealed += 1;
        at += total;
    }
    sealed
}

/// Recomputes, for every frame found walking `buf` by its length fields, the checksums of the
/// records inside and then the frame's own; returns how many frames were resealed.
pub(crate) fn reseal_frames(buf: &mut [u8]) -> usize {
    reseal_frames_in(buf, 0, usize::MAX, usize::MAX)
}

/// As [`reseal_frames`], over `buf[from..to]`, at most `max` frames; returns how many.
pub(crate) fn reseal_frames_in(buf: &mut [u8], from: usize, to: usize, max: usize) -> usize {
    let end = to.min(buf.len());
    let mut at = from;
    let mut sealed = 0;
    while sealed < max && at + batch::HEADER_LEN <= end {
        let Some(len) = le_u32(buf, at + 4) else { break };
        let Some(total) = (len as usize).checked_add(batch::HEADER_LEN) else { break };
        if at + total > end {
            break;
        }
        reseal_records(buf, at + batch::HEADER_LEN, at + total);
        let crc = buf.get(at + 4..at + total).map(crc32fast::hash).unwrap_or(0);
        put_u32(buf, at, crc);
        sealed += 1;
        at += total;
    }
    sealed
}
