//! Heads and leases, read from and written to the `sessions` rows. Every lease decision is by
//! the server's clock (`now()`), read inside the statement that needs it: a take judges the
//! held lease and sets the new expiry by the time its locking `SELECT` read, a renewal sets
//! `now() + ttl`, and a head is read with the server's time beside it
//! ([`SessionHead::read_at`]), by which its readers judge the lease. The hosts sharing the
//! database need not agree on the time.

use std::time::Duration;

use stepjournal_codec::{RunId, SessionId, UnixMillis};
use tokio_postgres::Row;

use super::failure::{PgError, store_error};
use super::shared::{Param, Shared, with_retries};
use crate::head::{LeaseTaken, OwnerId, SessionHead};
use crate::sql::head::HeadColumns;
use crate::sql::lease::{self, Decision, LeaseColumns};
use crate::{StoreError, sql};

fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

fn head_of(location: &str, row: &Row) -> Result<SessionHead, StoreError> {
    let failed =
        |e| store_error(location, "reading a session's head row", PgError::new("decoding", e));
    let session = SessionId::from_stored(row.try_get::<_, String>(0).map_err(failed)?);
    let next: i64 = row.try_get(1).map_err(failed)?;
    let last_at: Option<i64> = row.try_get(2).map_err(failed)?;
    let run = HeadColumns {
        state: row.try_get(3).map_err(failed)?,
        run: row.try_get(4).map_err(failed)?,
        outcome: row.try_get(5).map_err(failed)?,
        answered: row.try_get(6).map_err(failed)?,
    }
    .head();
    let lease = LeaseColumns {
        owner: row.try_get(7).map_err(failed)?,
        run: row.try_get(8).map_err(failed)?,
        expires: row.try_get(9).map_err(failed)?,
    }
    .lease();
    let now: i64 = row.try_get(10).map_err(failed)?;
    Ok(SessionHead {
        session,
        tail: sql::seq_from_column(location, "a head row's next_seq", next)?,
        last_at: UnixMillis(last_at.and_then(|t| u64::try_from(t).ok()).unwrap_or(0)),
        run: run.run,
        answered_while_suspended: run.answered_while_suspended,
        lease,
        read_at: Some(UnixMillis(u64::try_from(now).unwrap_or(0))),
    })
}

pub(super) async fn heads(shared: &Shared) -> Result<Vec<SessionHead>, StoreError> {
    let rows = with_retries!(shared, "reading the heads", |c| {
        c.stmts.heads.query(&c.client, &[]).await.map_err(|e| PgError::new("selecting", e))
    })?;
    rows.iter().map(|r| head_of(&shared.location, r)).collect()
}

pub(super) async fn head(
    shared: &Shared,
    session: &SessionId,
) -> Result<Option<SessionHead>, StoreError> {
    let s = session.as_str();
    let row = with_retries!(shared, &format!("reading the head of {session}"), |c| {
        c.stmts.head_row.query_opt(&c.client, &[&s]).await.map_err(|e| PgError::new("selecting", e))
    })?;
    row.map(|r| head_of(&shared.location, &r)).transpose()
}

/// What one attempt at taking a lease found: a decision, or a racing creator of the row.
enum Took {
    Done(LeaseTaken),
    Raced,
}

pub(super) async fn take_lease(
    shared: &Shared,
    session: &SessionId,
    owner: &OwnerId,
    run: &RunId,
    ttl: Duration,
    force: bool,
) -> Result<LeaseTaken, StoreError> {
    shared.check_writable()?;
    let lasts = ttl;
    let (s, o, r, ttl) = (session.as_str(), owner.as_str(), run.as_str(), ttl_ms(ttl));
    let what = format!("taking the lease of {session} for {owner}");
    loop {
        let took = with_retries!(shared, &what, |c| {
            async {
                let failed = |doing| move |e| PgError::new(doing, e);
                let tx = c.client.transaction().await.map_err(failed("beginning"))?;
                let row = c
                    .stmts
                    .lock_lease
                    .query_opt(&tx, &[&s])
                    .await
                    .map_err(failed("locking the head row"))?;
                let Some(row) = row else {
                    // No head row: one holding the lease, unless a racer made one first.
                    let made = c
                        .stmts
                        .insert_lease
                        .query_opt(&tx, &[&s as &Param<'_>, &o, &r, &ttl])
                        .await
                        .map_err(failed("inserting the head row"))?;
                    let Some(made) = made else { return Ok::<_, PgError>(Took::Raced) };
                    let expires: i64 = made.try_get(0).map_err(failed("decoding"))?;
                    tx.commit().await.map_err(failed("committing"))?;
                    let expires = UnixMillis(u64::try_from(expires).unwrap_or(0));
                    return Ok(Took::Done(LeaseTaken::Taken { expires, took_over: None }));
                };
                let held = LeaseColumns {
                    owner: row.try_get(0).map_err(failed("decoding"))?,
                    run: row.try_get(1).map_err(failed("decoding"))?,
                    expires: row.try_get(2).map_err(failed("decoding"))?,
                };
                let now: i64 = row.try_get(3).map_err(failed("decoding"))?;
                match lease::decide(held.lease(), owner, now, force) {
                    Decision::Refuse(lease) => Ok(Took::Done(LeaseTaken::HeldBy(lease))),
                    Decision::Take { took_over } => {
                        let expires = lease::expiry(now, lasts);
                        c.stmts
                            .set_lease
                            .execute(&tx, &[&s as &Param<'_>, &o, &r, &expires])
                            .await
                            .map_err(failed("setting the lease"))?;
                        tx.commit().await.map_err(failed("committing"))?;
                        let expires = UnixMillis(u64::try_from(expires).unwrap_or(0));
                        Ok(Took::Done(LeaseTaken::Taken { expires, took_over }))
                    }
                }
            }
            .await
        })?;
        match took {
            Took::Raced => continue,
            Took::Done(taken) => {
                if matches!(taken, LeaseTaken::Taken { took_over: Some(_), .. }) {
                    shared.metrics.took_over();
                }
                return Ok(taken);
            }
        }
    }
}

pub(super) async fn renew_leases(
    shared: &Shared,
    owner: &OwnerId,
    runs: &[(SessionId, RunId)],
    ttl: Duration,
) -> Result<Vec<SessionId>, StoreError> {
    shared.check_writable()?;
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let sessions: Vec<&str> = runs.iter().map(|(s, _)| s.as_str()).collect();
    let ids: Vec<&str> = runs.iter().map(|(_, r)| r.as_str()).collect();
    let (o, ttl) = (owner.as_str(), ttl_ms(ttl));
    let what = format!("renewing {} leases of {owner}", runs.len());
    let rows = with_retries!(shared, &what, |c| {
        let renewed =
            c.stmts.renew_leases.query(&c.client, &[&o as &Param<'_>, &sessions, &ttl, &ids]).await;
        renewed.map_err(|e| PgError::new("renewing", e))
    })?;
    let mut renewed = std::collections::BTreeSet::new();
    for row in &rows {
        let s: &str = row
            .try_get(0)
            .map_err(|e| store_error(&shared.location, &what, PgError::new("decoding", e)))?;
        renewed.insert(s.to_owned());
    }
    Ok(runs.iter().filter(|(s, _)| !renewed.contains(s.as_str())).map(|(s, _)| s.clone()).collect())
}

pub(super) async fn release_lease(
    shared: &Shared,
    session: &SessionId,
    owner: &OwnerId,
    run: &RunId,
) -> Result<(), StoreError> {
    shared.check_writable()?;
    let (s, o, r) = (session.as_str(), owner.as_str(), run.as_str());
    let what = format!("releasing the lease of {session} held by {owner}");
    with_retries!(shared, &what, |c| {
        let released = c.stmts.release_lease.execute(&c.client, &[&s, &o, &r]).await;
        released.map(|_| ()).map_err(|e| PgError::new("releasing", e))
    })
}
