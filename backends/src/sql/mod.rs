//! What the SQL backends share: a batch encoded as one checksummed record per row, rows checked
//! on the way back, and batch tokens.
//!
//! Each row's `record` column holds the event's record bytes exactly as the codec writes them
//! (session and sequence number inside the checksum), so a row moved, altered or damaged is
//! caught on read, and an export from any backend is byte-identical.

pub(crate) mod head;
pub(crate) mod lease;
pub(crate) mod metrics;

use std::ops::Range;

use stepjournal_codec::{
    DecodeError, EventKind, Limits, Record, Seq, SessionId, Stamped, batch, record,
};

use crate::{AppendError, StoreError};
use head::HeadChange;

/// One event of a batch, ready to be a row.
#[derive(Debug)]
pub(crate) struct Row {
    /// Its sequence number, known to fit an `i64`.
    pub seq: i64,
    /// Its append time, unix milliseconds (saturated to `i64::MAX`; the record holds the exact value).
    pub at: i64,
    /// Its event kind code.
    pub kind: u8,
    span: Range<usize>,
}

/// A batch encoded for the rows of one append.
#[derive(Debug)]
pub(crate) struct EncodedBatch {
    bytes: Vec<u8>,
    /// The rows, in sequence order.
    pub rows: Vec<Row>,
    /// What the batch does to its session's run head.
    pub head: HeadChange,
    /// Where it trims its session ([`trim_point`](crate::trim_point)): the rows before this
    /// seq are deleted in the transaction that inserts the batch; 0 when it trims nothing.
    pub trim: i64,
}

impl EncodedBatch {
    /// A row's record bytes.
    pub fn record(&self, row: &Row) -> &[u8] {
        self.bytes.get(row.span.clone()).unwrap_or_default()
    }

    /// The number of events.
    #[cfg(feature = "postgres")]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// The records' bytes, all rows together.
    pub fn bytes(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The append time of the batch's last event (the session's `last_at` once it lands).
    pub fn last_at(&self) -> i64 {
        self.rows.last().map_or(0, |r| r.at)
    }
}

/// Where a batch lands, as `i64` column values, when both ends fit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    /// The first sequence number.
    pub first: i64,
    /// The next sequence number after the batch.
    pub next: i64,
}

/// Encodes `events` as records at `expected`, `expected + 1`, ..., checking every limit the
/// file backend checks (empty batch, session id, record size, batch size) before anything is
/// written. Returns `None` for the place when the batch would run past `i64::MAX`: such a batch
/// cannot be at the tail, so the caller reports a conflict.
pub(crate) fn encode_batch(
    session: &SessionId,
    expected: Seq,
    events: &[Stamped],
    limits: &Limits,
) -> Result<(EncodedBatch, Option<Place>), AppendError> {
    if events.is_empty() {
        return Err(AppendError::EmptyBatch);
    }
    let encode_err = |e| AppendError::Encode { session: session.clone(), source: Box::new(e) };
    let trim = crate::trim_point(session, expected, events)?
        .map_or(0, |before| i64::try_from(before.get()).unwrap_or(i64::MAX));
    let mut bytes = Vec::with_capacity(events.len() * 128);
    let mut rows = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        let seq = expected.add(i as u64);
        let start = bytes.len();
        let len = record::encode_into(&mut bytes, session, seq, e.at, &e.event, limits)
            .map_err(encode_err)?;
        rows.push(Row {
            seq: i64::try_from(seq.get()).unwrap_or(i64::MAX),
            at: i64::try_from(e.at.get()).unwrap_or(i64::MAX),
            kind: e.event.kind().code(),
            span: start..start + len,
        });
    }
    let framed = bytes.len() + batch::HEADER_LEN;
    if framed > limits.max_batch as usize {
        return Err(encode_err(stepjournal_codec::EncodeError::BatchTooLarge {
            len: framed as u64,
            max: u64::from(limits.max_batch),
        }));
    }
    let place = expected.get().checked_add(events.len() as u64).and_then(|next| {
        Some(Place { first: i64::try_from(expected.get()).ok()?, next: i64::try_from(next).ok()? })
    });
    Ok((EncodedBatch { bytes, rows, head: HeadChange::of(events), trim }, place))
}

/// Decodes one stored row, checking that its record is the one that belongs at (`session`, `seq`).
pub(crate) fn decode_row(
    location: &str,
    session: &SessionId,
    seq: i64,
    bytes: &[u8],
    limits: &Limits,
) -> Result<Record, StoreError> {
    let corrupt = |source| StoreError::Corrupt {
        context: format!("{location}, session {session}, seq {seq}"),
        source,
    };
    let (rec, len) = record::decode(bytes, limits).map_err(corrupt)?;
    if len != bytes.len() {
        return Err(corrupt(DecodeError::Malformed {
            reason: format!("{} bytes follow the row's record", bytes.len() - len),
        }));
    }
    if rec.session != *session || i64::try_from(rec.seq.get()).ok() != Some(seq) {
        return Err(corrupt(DecodeError::Malformed {
            reason: format!("the row holds the record of session {} seq {}", rec.session, rec.seq),
        }));
    }
    Ok(rec)
}

/// Checks that rows read for `range` are dense: the first at the range's start, each next one
/// after the last. A hole means a row was lost, except before a first row that is a `snapshot`:
/// a trimmed session's log starts at its kept snapshot (the rows before it were deleted by the
/// trim, in the transaction that appended its `trimmed`).
pub(crate) fn check_dense(
    location: &str,
    session: &SessionId,
    start: u64,
    records: &[Record],
) -> Result<(), StoreError> {
    let mut want = match records.first() {
        Some(r) if r.seq.get() > start && r.event.kind() == EventKind::Snapshot => r.seq.get(),
        _ => start,
    };
    for r in records {
        if r.seq.get() != want {
            return Err(StoreError::Corrupt {
                context: format!("{location}, session {session}"),
                source: DecodeError::Malformed {
                    reason: format!("seq {want} is missing: the next stored row is seq {}", r.seq),
                },
            });
        }
        want = want.saturating_add(1);
    }
    Ok(())
}

/// Checks rows read from the session's newest snapshot on: the first is a snapshot, or seq 0
/// (a session with none), and the rest are dense after it. A first row of another kind past 0
/// means rows were lost before it, or its `kind` column disagrees with its record.
pub(crate) fn check_from_snapshot(
    location: &str,
    session: &SessionId,
    records: &[Record],
) -> Result<(), StoreError> {
    let Some(first) = records.first() else { return Ok(()) };
    if first.seq != Seq(0) && first.event.kind() != EventKind::Snapshot {
        return Err(StoreError::Corrupt {
            context: format!("{location}, session {session}, seq {}", first.seq),
            source: DecodeError::Malformed {
                reason: format!(
                    "the read from the newest snapshot starts at seq {} with a `{}` record: its \
                     `kind` column says snapshot, or the rows before it are missing",
                    first.seq,
                    first.event.kind().name()
                ),
            },
        });
    }
    check_dense(location, session, first.seq.get(), records)
}

/// A read range as `i64` bounds, clipped to what a column can hold.
pub(crate) fn range_bounds(range: &Range<Seq>) -> (i64, i64) {
    let clip = |s: Seq| i64::try_from(s.get()).unwrap_or(i64::MAX);
    (clip(range.start), clip(range.end))
}

/// A sequence number read from a column. A negative value is damage.
pub(crate) fn seq_from_column(location: &str, what: &str, value: i64) -> Result<Seq, StoreError> {
    u64::try_from(value).map(Seq).map_err(|_| StoreError::Corrupt {
        context: format!("{location}, {what}"),
        source: DecodeError::Malformed { reason: format!("negative sequence number {value}") },
    })
}

/// A batch token: 128 bits unique to this append. The first 64 bits are random per process
/// (from the OS's randomness through `RandomState`), the last 64 a per-process counter.
#[cfg(feature = "postgres")]
pub(crate) fn next_token() -> [u8; 16] {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    static PROCESS: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let process = *PROCESS.get_or_init(|| {
        let mut h = RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u128(d.as_nanos());
        }
        h.finish()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut token = [0u8; 16];
    let (hi, lo) = token.split_at_mut(8);
    hi.copy_from_slice(&process.to_le_bytes());
    lo.copy_from_slice(&n.to_le_bytes());
    token
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepjournal_codec::{Message, Role, UnixMillis};

    fn events(n: usize) -> Vec<Stamped> {
        (0..n)
            .map(|i| {
                Stamped::at(UnixMillis(7), Message { role: Role::User, text: format!("e{i}") })
            })
            .collect()
    }

    #[test]
    fn rows_decode_back_only_at_their_own_place() {
        let s = SessionId::from_stored("s");
        let limits = Limits::default();
        let (b, place) = encode_batch(&s, Seq(4), &events(2), &limits).unwrap();
        let place = place.unwrap();
        assert_eq!((place.first, place.next), (4, 6));
        let row = &b.rows[1];
        assert_eq!(row.seq, 5);
        let rec = decode_row("db", &s, 5, b.record(row), &limits).unwrap();
        assert_eq!(rec.seq, Seq(5));
        let moved = decode_row("db", &s, 6, b.record(row), &limits).unwrap_err();
        assert!(moved.to_string().contains("holds the record of session s seq 5"), "{moved}");
        let other = decode_row("db", &SessionId::from_stored("t"), 5, b.record(row), &limits);
        assert!(matches!(other, Err(StoreError::Corrupt { .. })));
        let mut damaged = b.record(row).to_vec();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        assert!(decode_row("db", &s, 5, &damaged, &limits).is_err());
    }

    #[test]
    fn a_batch_past_the_column_range_has_no_place() {
        let s = SessionId::from_stored("s");
        let (_, place) =
            encode_batch(&s, Seq(i64::MAX as u64), &events(1), &Limits::default()).unwrap();
        assert!(place.is_none());
    }

    #[test]
    fn limits_are_checked_before_anything_is_written() {
        let s = SessionId::from_stored("s");
        let small = Limits { max_record: 1 << 20, max_batch: 200, ..Limits::default() };
        let err = encode_batch(&s, Seq(0), &events(10), &small).unwrap_err();
        assert!(err.to_string().contains("maximum batch size"), "{err}");
        assert!(matches!(encode_batch(&s, Seq(0), &[], &small), Err(AppendError::EmptyBatch)));
    }

    #[test]
    fn a_hole_in_read_rows_is_reported() {
        let s = SessionId::from_stored("s");
        let limits = Limits::default();
        let (b, _) = encode_batch(&s, Seq(0), &events(3), &limits).unwrap();
        let recs: Vec<Record> = b
            .rows
            .iter()
            .map(|r| decode_row("db", &s, r.seq, b.record(r), &limits).unwrap())
            .collect();
        check_dense("db", &s, 0, &recs).unwrap();
        let holed = vec![recs[0].clone(), recs[2].clone()];
        let err = check_dense("db", &s, 0, &holed).unwrap_err();
        assert!(err.to_string().contains("seq 1 is missing"), "{err}");
    }

    #[test]
    fn a_read_from_a_snapshot_starts_at_a_snapshot_or_at_zero() {
        use stepjournal_codec::Snapshot;
        let s = SessionId::from_stored("s");
        let limits = Limits::default();
        let snapshot = |len| Snapshot {
            len,
            run: None,
            run_end: None,
            reply: None,
            commit: None,
            committed: vec![],
        };
        let mut batch = events(4);
        batch[2] = Stamped::at(UnixMillis(7), snapshot(2));
        let (b, _) = encode_batch(&s, Seq(0), &batch, &limits).unwrap();
        let recs: Vec<Record> = b
            .rows
            .iter()
            .map(|r| decode_row("db", &s, r.seq, b.record(r), &limits).unwrap())
            .collect();
        check_from_snapshot("db", &s, &recs).unwrap();
        check_from_snapshot("db", &s, &recs[2..]).unwrap();
        check_from_snapshot("db", &s, &[]).unwrap();
        let err = check_from_snapshot("db", &s, &recs[1..]).unwrap_err();
        assert!(err.to_string().contains("starts at seq 1 with a `message` record"), "{err}");
        let holed = vec![recs[2].clone(), recs[3].clone(), recs[3].clone()];
        let err = check_from_snapshot("db", &s, &holed).unwrap_err();
        assert!(err.to_string().contains("seq 4 is missing"), "{err}");
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn tokens_differ_between_appends() {
        assert_ne!(next_token(), next_token());
    }
}
