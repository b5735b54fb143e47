//! Heads and leases, read from and written to the `sessions` rows. Every lease decision is by
//! this machine's clock, read by the store (`clock::now_ms`) inside the transaction that needs
//! it: every process sharing the database file runs on it. A head is read with that time beside
//! it ([`SessionHead::read_at`]), by which its readers judge the lease.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, params};
use stepjournal_codec::{RunId, SessionId, UnixMillis};

use super::clock;
use super::conn::backend_error;
use super::shared::{Shared, Step, WriteFailure};
use crate::head::{LeaseTaken, OwnerId, SessionHead};
use crate::sql::head::HeadColumns;
use crate::sql::lease::{self, Decision, LeaseColumns};
use crate::{Durability, StoreError, sql};

const HEAD_COLUMNS: &str = "session, next_seq, last_at, run_state, run_id, outcome, answered, \
                            lease_owner, lease_run, lease_expires";

/// The head in `row` ([`HEAD_COLUMNS`]), read when this machine's clock read `now` (unix ms).
fn head_of(location: &str, row: &Row<'_>, now: i64) -> Result<SessionHead, StoreError> {
    let failed = |e| backend_error(format!("{location}: reading a session's head row"), e);
    let session = SessionId::from_stored(row.get::<_, String>(0).map_err(failed)?);
    let tail =
        sql::seq_from_column(location, "a head row's next_seq", row.get(1).map_err(failed)?)?;
    let last_at: i64 = row.get(2).map_err(failed)?;
    let run = HeadColumns {
        state: row.get(3).map_err(failed)?,
        run: row.get(4).map_err(failed)?,
        outcome: row.get(5).map_err(failed)?,
        answered: row.get(6).map_err(failed)?,
    }
    .head();
    let lease = LeaseColumns {
        owner: row.get(7).map_err(failed)?,
        run: row.get(8).map_err(failed)?,
        expires: row.get(9).map_err(failed)?,
    }
    .lease();
    Ok(SessionHead {
        session,
        tail,
        last_at: UnixMillis(u64::try_from(last_at).unwrap_or(0)),
        run: run.run,
        answered_while_suspended: run.answered_while_suspended,
        lease,
        read_at: Some(UnixMillis(u64::try_from(now).unwrap_or(0))),
    })
}

/// Every session's head, sorted by id.
pub(super) fn heads(shared: &Shared) -> Result<Vec<SessionHead>, StoreError> {
    shared.with_reader(|conn| {
        let failed = |e| backend_error(format!("{}: reading the heads", shared.location), e);
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {HEAD_COLUMNS} FROM sessions WHERE next_seq > 0 ORDER BY session"
            ))
            .map_err(failed)?;
        // Read before the rows: a lease in them is judged at a time no later than the rows
        // were read, so one live then is never called lapsed.
        let now = clock::now_ms();
        let mut rows = stmt.query([]).map_err(failed)?;
        let mut heads = Vec::new();
        while let Some(row) = rows.next().map_err(failed)? {
            heads.push(head_of(&shared.location, row, now)?);
        }
        Ok(heads)
    })
}

/// One session's head.
pub(super) fn head(
    shared: &Shared,
    session: &SessionId,
) -> Result<Option<SessionHead>, StoreError> {
    shared.with_reader(|conn| {
        let failed =
            |e| backend_error(format!("{}: reading the head of {session}", shared.location), e);
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {HEAD_COLUMNS} FROM sessions WHERE session = ?1 AND next_seq > 0"
            ))
            .map_err(failed)?;
        let now = clock::now_ms();
        let mut rows = stmt.query([session.as_str()]).map_err(failed)?;
        match rows.next().map_err(failed)? {
            Some(row) => head_of(&shared.location, row, now).map(Some),
            None => Ok(None),
        }
    })
}

fn held(conn: &Connection, session: &SessionId) -> rusqlite::Result<LeaseColumns> {
    let mut stmt = conn.prepare_cached(
        "SELECT lease_owner, lease_run, lease_expires FROM sessions WHERE session = ?1",
    )?;
    let found = stmt
        .query_row([session.as_str()], |r| {
            Ok(LeaseColumns { owner: r.get(0)?, run: r.get(1)?, expires: r.get(2)? })
        })
        .optional()?;
    Ok(found.unwrap_or_default())
}

fn lease_write<T>(
    shared: &Shared,
    what: &str,
    body: impl FnOnce(&Connection) -> rusqlite::Result<Step<T>>,
) -> Result<T, StoreError> {
    // A lease is metadata beside the log: a loss of power forgets at most its last writes,
    // which leaves leases older, never one nobody took. Not synced.
    match shared.write(Durability::Buffered, what, body) {
        Ok(value) => Ok(value),
        Err(WriteFailure::Failed(e)) => Err(e),
        Err(WriteFailure::CommitUnknown(unknown)) => {
            Err(StoreError::Poisoned { first_failure: unknown.reason })
        }
    }
}

pub(super) fn take_lease(
    shared: &Shared,
    session: &SessionId,
    owner: &OwnerId,
    run: &RunId,
    ttl: Duration,
    force: bool,
) -> Result<LeaseTaken, StoreError> {
    let what = format!("taking the lease of {session} for {owner}");
    let taken = lease_write(shared, &what, |conn| {
        let now = clock::now_ms();
        match lease::decide(held(conn, session)?.lease(), owner, now, force) {
            Decision::Refuse(lease) => Ok(Step::Rollback(LeaseTaken::HeldBy(lease))),
            Decision::Take { took_over } => {
                let expires = lease::expiry(now, ttl);
                let mut stmt = conn.prepare_cached(
                    "INSERT INTO sessions
                         (session, next_seq, last_at, run_state, lease_owner, lease_run, lease_expires)
                     VALUES (?1, 0, 0, 0, ?2, ?3, ?4)
                     ON CONFLICT (session) DO UPDATE SET lease_owner = excluded.lease_owner,
                         lease_run = excluded.lease_run, lease_expires = excluded.lease_expires",
                )?;
                stmt.execute(params![session.as_str(), owner.as_str(), run.as_str(), expires])?;
                let expires = UnixMillis(u64::try_from(expires).unwrap_or(0));
                Ok(Step::Commit(LeaseTaken::Taken { expires, took_over }))
            }
        }
    })?;
    if matches!(taken, LeaseTaken::Taken { took_over: Some(_), .. }) {
        shared.metrics.took_over();
    }
    Ok(taken)
}

pub(super) fn renew_leases(
    shared: &Shared,
    owner: &OwnerId,
    runs: &[(SessionId, RunId)],
    ttl: Duration,
) -> Result<Vec<SessionId>, StoreError> {
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let what = format!("renewing {} leases of {owner}", runs.len());
    lease_write(shared, &what, |conn| {
        let expires = lease::expiry(clock::now_ms(), ttl);
        let mut stmt = conn.prepare_cached(
            "UPDATE sessions SET lease_expires = ?1
             WHERE session = ?2 AND lease_owner = ?3 AND lease_run = ?4",
        )?;
        let mut lost = Vec::new();
        for (session, run) in runs {
            let renewed =
                stmt.execute(params![expires, session.as_str(), owner.as_str(), run.as_str()])?;
            if renewed == 0 {
                lost.push(session.clone());
            }
        }
        Ok(if lost.len() < runs.len() { Step::Commit(lost) } else { Step::Rollback(lost) })
    })
}

pub(super) fn release_lease(
    shared: &Shared,
    session: &SessionId,
    owner: &OwnerId,
    run: &RunId,
) -> Result<(), StoreError> {
    let what = format!("releasing the lease of {session} held by {owner}");
    lease_write(shared, &what, |conn| {
        let mut stmt = conn.prepare_cached(
            "UPDATE sessions SET lease_owner = NULL, lease_run = NULL, lease_expires = NULL
             WHERE session = ?1 AND lease_owner = ?2 AND lease_run = ?3",
        )?;
        let released = stmt.execute(params![session.as_str(), owner.as_str(), run.as_str()])?;
        Ok(if released > 0 { Step::Commit(()) } else { Step::Rollback(()) })
    })
}
