//! The reads of a session's events: the statements, and the rows they select decoded and
//! checked as records.

use rusqlite::types::ValueRef;
use rusqlite::{Params, params};
use stepjournal_codec::{DecodeError, Record, SessionId};

use super::conn::backend_error;
use super::shared::Shared;
use crate::{StoreError, sql};

/// `?1` session, `?2` start, `?3` end: `(seq, record)` in order.
const RANGE: &str = "SELECT seq, record FROM events
                     WHERE session = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq";

/// `?1` session: `(seq, record)` from its newest snapshot on, in order (from seq 0 when it has
/// none). One statement, so the snapshot found and the rows read agree. The subquery finds the
/// snapshot as the last entry of the session's in the partial index `events_snapshots` (its
/// condition names the same literal kind); the rows are a range of the primary key.
/// `INDEXED BY` holds the planner to the index: without statistics it may otherwise walk the
/// session's rows back through the primary key, and a statement that could not use the index
/// fails to prepare rather than scanning.
pub(super) const FROM_SNAPSHOT: &str = "SELECT seq, record FROM events
     WHERE session = ?1 AND seq >= coalesce(
         (SELECT max(seq) FROM events INDEXED BY events_snapshots
          WHERE session = ?1 AND kind = 17), 0)
     ORDER BY seq";

/// The session's rows with `start <= seq < end`, decoded.
pub(super) fn range(
    shared: &Shared,
    session: &SessionId,
    start: i64,
    end: i64,
) -> Result<Vec<Record>, StoreError> {
    records(shared, session, RANGE, params![session.as_str(), start, end])
}

/// The session's rows from its newest snapshot on, decoded.
pub(super) fn from_snapshot(
    shared: &Shared,
    session: &SessionId,
) -> Result<Vec<Record>, StoreError> {
    records(shared, session, FROM_SNAPSHOT, params![session.as_str()])
}

/// Runs `statement`, which selects `(seq, record)` rows of `session`, on a reader connection and
/// decodes each row, checking that it holds the record of its place.
fn records(
    shared: &Shared,
    session: &SessionId,
    statement: &str,
    params: impl Params,
) -> Result<Vec<Record>, StoreError> {
    let limits = shared.options.limits;
    shared.with_reader(|conn| {
        let failed = |e| backend_error(format!("{}: reading {session}", shared.location), e);
        let mut stmt = conn.prepare_cached(statement).map_err(failed)?;
        let mut rows = stmt.query(params).map_err(failed)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(failed)? {
            let seq: i64 = row.get(0).map_err(failed)?;
            let bytes = match row.get_ref(1).map_err(failed)? {
                ValueRef::Blob(b) => b,
                other => {
                    return Err(StoreError::Corrupt {
                        context: format!("{}, session {session}, seq {seq}", shared.location),
                        source: DecodeError::Malformed {
                            reason: format!(
                                "the record column holds {:?}, not a blob",
                                other.data_type()
                            ),
                        },
                    });
                }
            };
            out.push(sql::decode_row(&shared.location, session, seq, bytes, &limits)?);
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_the_snapshot_kind() {
        let condition = format!("kind = {}", stepjournal_codec::EventKind::Snapshot.code());
        assert!(FROM_SNAPSHOT.contains(&condition), "{FROM_SNAPSHOT}");
    }
}
