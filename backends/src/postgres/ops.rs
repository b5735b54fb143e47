//! The store's operations other than appends and leases, as they run on its runtime: each is
//! safe to repeat, so a lost connection or a serialization failure is retried.

use std::ops::Range;

use stepjournal_codec::{Record, Seq, SessionId};
use tokio_postgres::Row;

use super::failure::{PgError, store_error};
use super::shared::{Param, Shared, with_retries};
use crate::{StoreError, sql};

pub(super) async fn read(
    shared: &Shared,
    session: &SessionId,
    range: Range<Seq>,
) -> Result<Vec<Record>, StoreError> {
    let (start, end) = sql::range_bounds(&range);
    let s = session.as_str();
    let rows = with_retries!(shared, &format!("reading {session}"), |c| {
        let rows = c.stmts.read.query(&c.client, &[&s as &Param<'_>, &start, &end]).await;
        rows.map_err(|e| PgError::new("selecting events", e))
    })?;
    let out = records(shared, session, rows)?;
    sql::check_dense(&shared.location, session, range.start.get(), &out)?;
    Ok(out)
}

/// The session's events from its newest snapshot on, in one statement (see
/// [`Statements::read_from_snapshot`](super::schema::Statements::read_from_snapshot)).
pub(super) async fn read_from_snapshot(
    shared: &Shared,
    session: &SessionId,
) -> Result<Vec<Record>, StoreError> {
    let s = session.as_str();
    let rows = with_retries!(shared, &format!("reading {session}"), |c| {
        let rows = c.stmts.read_from_snapshot.query(&c.client, &[&s as &Param<'_>]).await;
        rows.map_err(|e| PgError::new("selecting events from the newest snapshot", e))
    })?;
    let out = records(shared, session, rows)?;
    sql::check_from_snapshot(&shared.location, session, &out)?;
    Ok(out)
}

/// Decodes `(seq, record)` rows of `session`, checking that each holds the record of its place.
fn records(
    shared: &Shared,
    session: &SessionId,
    rows: Vec<Row>,
) -> Result<Vec<Record>, StoreError> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let (seq, bytes): (i64, &[u8]) =
            row.try_get(0).and_then(|seq| Ok((seq, row.try_get(1)?))).map_err(|e| {
                store_error(&shared.location, "reading a row", PgError::new("decoding", e))
            })?;
        out.push(sql::decode_row(&shared.location, session, seq, bytes, &shared.options.limits)?);
    }
    Ok(out)
}

pub(super) async fn tail(shared: &Shared, session: &SessionId) -> Result<Seq, StoreError> {
    let s = session.as_str();
    let tail = with_retries!(shared, &format!("reading the tail of {session}"), |c| {
        match c.stmts.tail.query_opt(&c.client, &[&s]).await {
            Ok(row) => row
                .map_or(Ok(0), |r| r.try_get::<_, i64>(0))
                .map_err(|e| PgError::new("decoding the head row", e)),
            Err(e) => Err(PgError::new("selecting the head row", e)),
        }
    })?;
    sql::seq_from_column(&shared.location, "the session's head row", tail)
}

pub(super) async fn sessions(shared: &Shared) -> Result<Vec<SessionId>, StoreError> {
    let rows = with_retries!(shared, "listing sessions", |c| {
        c.stmts.sessions.query(&c.client, &[]).await.map_err(|e| PgError::new("selecting", e))
    })?;
    rows.iter()
        .map(|r| {
            r.try_get::<_, &str>(0).map(SessionId::from_stored).map_err(|e| {
                store_error(&shared.location, "listing sessions", PgError::new("decoding", e))
            })
        })
        .collect()
}

/// Deletes the session, if its tail is `tail` when one is given: whether it had events, or its
/// tail when that is not `tail` (nothing deleted).
pub(super) async fn delete(
    shared: &Shared,
    session: &SessionId,
    tail: Option<Seq>,
) -> Result<Result<bool, Seq>, StoreError> {
    shared.check_writable()?;
    // Repeating a delete is harmless; a session seen by any attempt existed. An attempt whose
    // commit was lost passed the tail check: a retry that finds the session gone reports it
    // deleted.
    let mut existed = false;
    let mut passed = false;
    let s = session.as_str();
    let changed = with_retries!(shared, &format!("deleting {session}"), |c| {
        async {
            let tx = c.client.transaction().await.map_err(|e| PgError::new("beginning", e))?;
            // Lock the head first: a concurrent append finishes before the events are deleted,
            // and the delete below (a new snapshot) sees what it wrote.
            let head = c
                .stmts
                .lock_head
                .query_opt(&tx, &[&s])
                .await
                .map_err(|e| PgError::new("locking the head row", e))?;
            let actual = head.and_then(|r| r.try_get::<_, i64>(0).ok()).unwrap_or(0);
            let actual = Seq(u64::try_from(actual).unwrap_or(0));
            if let Some(expected) = tail
                && expected != actual
                && !(passed && actual == Seq(0))
            {
                tx.rollback().await.map_err(|e| PgError::new("rolling back", e))?;
                return Ok::<_, PgError>(Some(actual));
            }
            passed = true;
            let events = c
                .stmts
                .delete_events
                .execute(&tx, &[&s])
                .await
                .map_err(|e| PgError::new("deleting events", e))?;
            c.stmts
                .delete_head
                .execute(&tx, &[&s])
                .await
                .map_err(|e| PgError::new("deleting the head row", e))?;
            // Counted before the commit: if it is lost and landed, the retry finds nothing.
            existed |= actual > Seq(0) || events > 0;
            tx.commit().await.map_err(|e| PgError::new("committing", e))?;
            Ok(None)
        }
        .await
    })?;
    Ok(match changed {
        Some(actual) => Err(actual),
        None => Ok(existed),
    })
}

pub(super) async fn drop_schema(shared: &Shared) -> Result<(), StoreError> {
    let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", shared.pool.connector.quoted_schema);
    with_retries!(shared, "dropping the schema", |c| {
        c.client.batch_execute(&sql).await.map_err(|e| PgError::new("dropping the schema", e))
    })
}
