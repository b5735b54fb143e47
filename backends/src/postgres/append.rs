//! An append: one compare-and-set statement, retried after serialization failures, and resolved
//! through its batch token when the connection is lost while it is in flight.
//!
//! The token is written on the session's head row by the statement that moves the head, so the
//! row holds the token of the session's last batch and nothing else keeps one. After a lost
//! connection the head row, read once the lost transaction has ended, tells: its token is this
//! batch's (landed); its tail is short of the batch's end, or at it with another token (not
//! landed: a batch lands only at its place); past it with another token (another writer
//! appended since: whether this batch came first is not known).

use std::sync::Arc;
use std::time::Duration;

use stepjournal_codec::{Seq, SessionId};
use tokio::time::Instant;

use super::cause::describe;
use super::failure::{BACKEND, Class, Failure, PgError, store_error};
use super::ops;
use super::pool::Conn;
use super::schema::Stmt;
use super::shared::{Param, Shared, backoff, bump, deadline};
use crate::sql::{EncodedBatch, Place};
use crate::{AppendAck, AppendError, Durability, StoreError};

/// What reading back a batch token found.
enum Resolution {
    Landed,
    NotLanded,
    Unknown(String),
}

/// One append, checked and encoded, ready to run on the store's runtime.
#[derive(Debug)]
pub(super) struct Append {
    pub session: SessionId,
    pub expected: Seq,
    pub place: Place,
    pub batch: EncodedBatch,
    pub durability: Durability,
}

/// Runs the append (see the [module documentation](self)); `durability` is at most `Synced`.
pub(super) async fn append(store: Arc<Shared>, append: Append) -> Result<AppendAck, AppendError> {
    let started = std::time::Instant::now();
    let Append { session, expected, place, batch, durability } = append;
    let result = run(&store, &session, expected, place, &batch, durability).await;
    if result.is_ok() {
        let synced = durability == Durability::Synced;
        store.metrics.group(1, 1, batch.bytes(), synced, started.elapsed());
    }
    result
}

async fn run(
    store: &Shared,
    session: &SessionId,
    expected: Seq,
    place: Place,
    batch: &EncodedBatch,
    durability: Durability,
) -> Result<AppendAck, AppendError> {
    let synchronous = durability == Durability::Synced;
    let token = crate::sql::next_token();
    let ats: Vec<i64> = batch.rows.iter().map(|r| r.at).collect();
    let kinds: Vec<i16> = batch.rows.iter().map(|r| i16::from(r.kind)).collect();
    let records: Vec<&[u8]> = batch.rows.iter().map(|r| batch.record(r)).collect();
    let s = session.as_str();
    let token_ref: &[u8] = &token;
    let change = batch.head.code();
    let last_at = batch.last_at();
    let head = batch.head.columns();
    let ack = AppendAck { first: expected, next: Seq(place.next as u64), durability };
    let what = format!("appending to {session} at {expected}");
    let mut last = String::new();
    // Set once a lost connection was resolved as "not landed": a late commit of that attempt
    // would show as a conflict carrying this batch's token.
    let mut was_lost = false;
    for attempt in 0..=store.options.max_retries {
        if attempt > 0 {
            tokio::time::sleep(backoff(attempt)).await;
        }
        let mut lease = match store.pool.get().await {
            Ok(lease) => lease,
            // A connection that could not be opened (the server ended it while it was set up,
            // say): nothing of the batch was sent; try again unless the server refused.
            Err(Failure::Driver(e)) if e.class() != Class::Refused => {
                last = format!("{}: {}", e.doing, describe(&e.source));
                continue;
            }
            Err(f) => return Err(store.failure(&what, f).into()),
        };
        let Some(c) = lease.conn() else {
            continue;
        };
        // Behind a transaction pooler no session setting is kept: a `Buffered` append sets
        // `synchronous_commit = off` for its own transaction (below), a `Synced` one has the
        // server's `on`, which the store checked when it opened.
        let pooled = store.options.transaction_pooler;
        if !pooled && c.synchronous_commit != synchronous {
            let set = if synchronous {
                "SET synchronous_commit = on"
            } else {
                "SET synchronous_commit = off"
            };
            if let Err(e) = c.client.batch_execute(set).await {
                // Nothing of the batch was sent yet.
                let e = PgError::new("setting synchronous_commit", e);
                if e.class() == Class::Refused {
                    return Err(store_error(&store.location, &what, e).into());
                }
                lease.discard();
                last = describe(&e.source);
                continue;
            }
            c.synchronous_commit = synchronous;
        }
        let statement = if place.first == 0 { &c.stmts.append_new } else { &c.stmts.append };
        let params: [&Param<'_>; 13] = [
            &s,
            &place.first,
            &place.next,
            &token_ref,
            &ats,
            &kinds,
            &records,
            &change,
            &last_at,
            &head.state,
            &head.run,
            &head.outcome,
            &head.answered,
        ];
        let local_off = pooled && !synchronous;
        let result = if batch.trim > 0 || local_off {
            // A trim: the append and the delete of the rows before it in one transaction,
            // the delete only once the append moved the head; behind a transaction pooler a
            // `Buffered` append's `SET LOCAL synchronous_commit = off` with it.
            let trim = (batch.trim > 0).then_some((&c.stmts.trim_events, batch.trim));
            in_transaction(&mut c.client, statement, &params, trim, s, batch.len(), local_off).await
        } else {
            statement.query_one(&c.client, &params).await
        };
        let err = match result.and_then(|row| row.try_get::<_, i64>(0)) {
            Ok(n) if n == batch.len() as i64 => return Ok(ack),
            Ok(0) => {
                // A lost attempt's statement may have reached the server late and landed.
                if was_lost {
                    let found = c
                        .stmts
                        .head
                        .query_opt(&c.client, &[&s])
                        .await
                        .and_then(|row| row.map(|r| Head::of(&r)).transpose());
                    match found.map(|head| judge(head, place, &token)) {
                        Ok(Resolution::Landed) => {
                            bump(&store.counters.lost_landed);
                            return Ok(ack);
                        }
                        Ok(Resolution::Unknown(reason)) => {
                            bump(&store.counters.outcome_unknown);
                            return Err(AppendError::OutcomeUnknown {
                                session: session.clone(),
                                expected,
                                reason,
                                source: None,
                            });
                        }
                        Ok(Resolution::NotLanded) | Err(_) => {}
                    }
                }
                drop(lease);
                let actual = ops::tail(store, session).await?;
                if actual != expected {
                    return Err(AppendError::Conflict { expected, actual });
                }
                // The head moved away and back (a delete in between): try again.
                last = "the session's head moved during the append".to_owned();
                continue;
            }
            Ok(n) => {
                return Err(AppendError::Store(StoreError::Backend {
                    backend: BACKEND,
                    context: format!("{}: {what}", store.location),
                    source: format!("the statement inserted {n} of {} events", batch.len()).into(),
                }));
            }
            Err(e) => PgError::new("running the append", e),
        };
        match err.class() {
            Class::Refused => return Err(store_error(&store.location, &what, err).into()),
            Class::Retry => {
                bump(&store.counters.retried);
                last = describe(&err.source);
            }
            Class::Lost => {
                lease.discard();
                drop(lease);
                match resolve(store, s, place, &token).await {
                    Resolution::Landed => {
                        bump(&store.counters.lost_landed);
                        return Ok(ack);
                    }
                    Resolution::NotLanded => {
                        bump(&store.counters.lost_not_landed);
                        was_lost = true;
                        last = format!(
                            "the connection was lost ({}) and the batch did not land",
                            describe(&err.source)
                        );
                    }
                    Resolution::Unknown(reason) => {
                        bump(&store.counters.outcome_unknown);
                        return Err(AppendError::OutcomeUnknown {
                            session: session.clone(),
                            expected,
                            reason: format!(
                                "the connection was lost during the append ({}); {reason}",
                                describe(&err.source)
                            ),
                            source: None,
                        });
                    }
                }
            }
        }
    }
    Err(AppendError::Store(StoreError::Backend {
        backend: BACKEND,
        context: format!("{}: {what}", store.location),
        source: format!(
            "gave up after {} attempts; nothing was written; the last failure: {last}",
            u64::from(store.options.max_retries) + 1
        )
        .into(),
    }))
}

/// An append in a transaction of its own: `statement`, and, once it inserted every event, the
/// delete of `session`'s rows before the trim (`trim`: the statement and the seq), committed
/// together; with `synchronous_commit = off` for this transaction alone when asked (a `Buffered`
/// append behind a transaction pooler). Returns the append's row (its count of events inserted,
/// 0 when the tail was not the batch's).
async fn in_transaction(
    client: &mut tokio_postgres::Client,
    statement: &Stmt,
    params: &[&Param<'_>],
    trim: Option<(&Stmt, i64)>,
    session: &str,
    events: usize,
    synchronous_commit_off: bool,
) -> Result<tokio_postgres::Row, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    if synchronous_commit_off {
        tx.batch_execute("SET LOCAL synchronous_commit = off").await?;
    }
    let row = statement.query_one(&tx, params).await?;
    if let Some((trim_events, before)) = trim
        && row.try_get::<_, i64>(0)? == events as i64
    {
        trim_events.execute(&tx, &[&session, &before]).await?;
    }
    tx.commit().await?;
    Ok(row)
}

/// A session's head row: its tail and the token of its last batch.
struct Head {
    next: i64,
    token: Option<Vec<u8>>,
}

impl Head {
    fn of(row: &tokio_postgres::Row) -> Result<Self, tokio_postgres::Error> {
        Ok(Head { next: row.try_get(0)?, token: row.try_get(1)? })
    }
}

/// What the session's head row (`None`: no row) says of the batch at `place` with `token`
/// (see the [module documentation](self)).
fn judge(head: Option<Head>, place: Place, token: &[u8; 16]) -> Resolution {
    let Head { next, token: stored } = head.unwrap_or(Head { next: 0, token: None });
    if stored.as_deref() == Some(&token[..]) {
        Resolution::Landed
    } else if next <= place.next {
        Resolution::NotLanded
    } else {
        Resolution::Unknown(format!(
            "another writer appended to the session since (its tail is at {next}, past the \
             batch's end at {}), so whether the batch landed first cannot be told; read the \
             session before writing again",
            place.next
        ))
    }
}

/// Learns whether the batch with `token` landed, on a new connection, trying until the
/// store's resolve timeout.
async fn resolve(store: &Shared, session: &str, place: Place, token: &[u8; 16]) -> Resolution {
    let limit = store.options.resolve_timeout;
    let deadline = deadline(limit);
    let mut attempt: u32 = 0;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let open = store.pool.connector.open(Some(remaining));
        let error = match tokio::time::timeout_at(deadline, open).await {
            Ok(Ok(mut conn)) => {
                let read = read_back(&mut conn, session, place, remaining);
                match tokio::time::timeout_at(deadline, read).await {
                    Ok(Ok(head)) => return judge(head, place, token),
                    Ok(Err(e)) => describe(&e),
                    Err(_) => "reading the head row did not finish in time".to_owned(),
                }
            }
            Ok(Err(e)) => format!("{}: {}", e.doing, describe(&e.source)),
            Err(_) => "connecting did not finish in time".to_owned(),
        };
        attempt = attempt.saturating_add(1);
        let pause = backoff(attempt).max(Duration::from_millis(20));
        if Instant::now() + pause >= deadline {
            return Resolution::Unknown(format!(
                "the database could not be reached within {limit:?} to learn whether the batch \
                 landed (last error: {error}); read the session's tail before writing again"
            ));
        }
        tokio::time::sleep(pause).await;
    }
}

/// Reads the session's head row after waiting for any transaction still holding it (the lost
/// one, if the server has not yet finished it).
async fn read_back(
    conn: &mut Conn,
    session: &str,
    place: Place,
    remaining: Duration,
) -> Result<Option<Head>, tokio_postgres::Error> {
    let ms = remaining.as_millis().max(1);
    let tx = conn.client.transaction().await?;
    tx.batch_execute(&format!("SET LOCAL lock_timeout = {ms}; SET LOCAL statement_timeout = {ms}"))
        .await?;
    if place.first == 0 {
        // A new session: the lost statement inserted the head row; this insert waits for it
        // (and, if it did not, puts a row at 0 that the rollback below takes back).
        conn.stmts.claim_head.execute(&tx, &[&session]).await?;
    }
    let head = conn
        .stmts
        .lock_head
        .query_opt(&tx, &[&session])
        .await?
        .map(|r| Head::of(&r))
        .transpose()?;
    tx.rollback().await?;
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: [u8; 16] = [7; 16];
    const THEIRS: [u8; 16] = [9; 16];
    const AT: Place = Place { first: 5, next: 8 };

    fn judged(next: i64, token: Option<[u8; 16]>) -> Resolution {
        judge(Some(Head { next, token: token.map(|t| t.to_vec()) }), AT, &OURS)
    }

    #[test]
    fn the_head_rows_token_tells_whether_a_batch_landed() {
        assert!(matches!(judged(8, Some(OURS)), Resolution::Landed));
        // The head short of the batch's place or end: it did not land.
        assert!(matches!(judged(5, Some(THEIRS)), Resolution::NotLanded));
        assert!(matches!(judged(6, Some(THEIRS)), Resolution::NotLanded));
        assert!(matches!(judge(None, Place { first: 0, next: 3 }, &OURS), Resolution::NotLanded));
        // Another batch ends where this one would: this one did not land.
        assert!(matches!(judged(8, Some(THEIRS)), Resolution::NotLanded));
        // Past its end with another token: another writer appended after it or in its place.
        let Resolution::Unknown(reason) = judged(12, Some(THEIRS)) else {
            panic!("a head past the batch with another token is not known");
        };
        assert!(reason.contains("another writer appended"), "{reason}");
    }
}
