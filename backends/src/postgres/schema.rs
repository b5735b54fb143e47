//! The statements the store runs: prepared on each connection, or, behind a transaction
//! pooler (`?pooler=transaction`), sent unnamed with their types each time (a named statement
//! lives on one server connection, which a transaction pooler does not keep for a client).

use stepjournal_codec::RunOutcome;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Error, GenericClient, Row, Statement};

/// One statement of the store: its text and parameter types, and the statement prepared on the
/// connection when the store prepares them (not behind a transaction pooler).
#[derive(Debug)]
pub(crate) struct Stmt {
    sql: String,
    types: &'static [Type],
    prepared: Option<Statement>,
}

/// A statement's parameters.
type Params<'a> = [&'a (dyn ToSql + Sync)];

impl Stmt {
    fn typed<'a>(&self, params: &'a Params<'a>) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
        params.iter().copied().zip(self.types.iter().cloned()).collect()
    }

    /// Runs it on `c` (a connection or a transaction): every row.
    pub(crate) async fn query<C: GenericClient + Sync>(
        &self,
        c: &C,
        params: &Params<'_>,
    ) -> Result<Vec<Row>, Error> {
        match &self.prepared {
            Some(statement) => c.query(statement, params).await,
            None => c.query_typed(&self.sql, &self.typed(params)).await,
        }
    }

    /// Runs it on `c`: its one row.
    pub(crate) async fn query_one<C: GenericClient + Sync>(
        &self,
        c: &C,
        params: &Params<'_>,
    ) -> Result<Row, Error> {
        match &self.prepared {
            Some(statement) => c.query_one(statement, params).await,
            None => c.query_typed_one(&self.sql, &self.typed(params)).await,
        }
    }

    /// Runs it on `c`: its row, if any.
    pub(crate) async fn query_opt<C: GenericClient + Sync>(
        &self,
        c: &C,
        params: &Params<'_>,
    ) -> Result<Option<Row>, Error> {
        match &self.prepared {
            Some(statement) => c.query_opt(statement, params).await,
            None => c.query_typed_opt(&self.sql, &self.typed(params)).await,
        }
    }

    /// Runs it on `c`: the rows it changed.
    pub(crate) async fn execute<C: GenericClient + Sync>(
        &self,
        c: &C,
        params: &Params<'_>,
    ) -> Result<u64, Error> {
        match &self.prepared {
            Some(statement) => c.execute(statement, params).await,
            None => c.execute_typed(&self.sql, &self.typed(params)).await,
        }
    }
}

/// The statements of one connection, prepared when it opens (unless behind a transaction
/// pooler).
///
/// Each statement modifies a table at most once (CockroachDB refuses two modifications of one
/// table in a statement): an append moves the head row with one `UPDATE` (an existing session)
/// or one `INSERT ... ON CONFLICT DO UPDATE` (a batch at 0), and inserts the events.
#[derive(Debug)]
pub(crate) struct Statements {
    /// A batch after seq 0. `$1` session, `$2` expected, `$3` next, `$4` token, `$5` times,
    /// `$6` kinds, `$7` records, `$8` the batch's head change (0 keep, 1 answered, 2 set),
    /// `$9` its last time, `$10`-`$13` the run head a set writes (state, run, outcome,
    /// answered). Moves the head row from `$2` to `$3`, setting its token, last time and run
    /// head, and inserts the events only if it moved. Returns the number of events inserted:
    /// all of them, or 0 when the tail was not `$2`.
    pub append: Stmt,
    /// A batch at seq 0 (a new session), the parameters as for [`Statements::append`] with `$2`
    /// 0 and `$10`-`$13` the run head of a session with no run after the batch: inserts the
    /// head row (or moves one left at 0, keeping its lease) and the events.
    pub append_new: Stmt,
    /// `$1` session: the next sequence number, if the session exists.
    pub tail: Stmt,
    /// `$1` session, `$2` start, `$3` end: `(seq, record)` in order.
    pub read: Stmt,
    /// `$1` session: `(seq, record)` from its newest snapshot on, in order (from seq 0 when it
    /// has none); see [`from_snapshot_sql`].
    pub read_from_snapshot: Stmt,
    /// Every session with events, sorted.
    pub sessions: Stmt,
    /// `$1` session: `(next_seq, token)` of its head row, locked (waiting for a writer that
    /// holds it).
    pub lock_head: Stmt,
    /// `$1` session: `(next_seq, token)` of its head row, not locked.
    pub head: Stmt,
    /// `$1` session: inserts a head row at 0 unless one exists, waiting for an uncommitted
    /// insert of the same session to end. Used only in a transaction rolled back after.
    pub claim_head: Stmt,
    /// `$1` session: deletes its events.
    pub delete_events: Stmt,
    /// `$1` session, `$2` seq: deletes the session's rows before `$2` (a trim, run in the
    /// append's transaction once the append moved the head; a second modification of `events`
    /// in the append's statement is what CockroachDB refuses).
    pub trim_events: Stmt,
    /// `$1` session: deletes its head row.
    pub delete_head: Stmt,
    /// Every session's head row with events, sorted: [`HEAD_COLUMNS`], then the server's clock
    /// in unix ms, read by the statement that reads the rows.
    pub heads: Stmt,
    /// `$1` session: its head row, if it has events: [`HEAD_COLUMNS`], then the server's clock
    /// in unix ms.
    pub head_row: Stmt,
    /// `$1` session: `(lease_owner, lease_run, lease_expires, now)` of its head row, locked;
    /// `now` is the server's clock in unix ms.
    pub lock_lease: Stmt,
    /// `$1` session, `$2` owner, `$3` run, `$4` ttl (ms): a head row at 0 holding the lease,
    /// unless a row exists. Returns its `lease_expires`.
    pub insert_lease: Stmt,
    /// `$1` session, `$2` owner, `$3` run, `$4` expiry (unix ms): sets the row's lease.
    pub set_lease: Stmt,
    /// `$1` owner, `$2` sessions, `$3` ttl (ms), `$4` runs: renews the owner's leases on
    /// those runs, returning the sessions renewed.
    pub renew_leases: Stmt,
    /// `$1` session, `$2` owner, `$3` run: clears the lease if it is still that one.
    pub release_lease: Stmt,
}

/// The columns of a head as [`Statements::heads`] and [`Statements::head_row`] read them.
pub(crate) const HEAD_COLUMNS: &str = "session, next_seq, last_at, run_state, run_id, outcome, \
                                       answered, lease_owner, lease_run, lease_expires";

/// The server's clock in unix milliseconds (the transaction's start: one time per statement).
const NOW_MS: &str = "(extract(epoch FROM now()) * 1000)::int8";

/// The read from a session's newest snapshot (see [`Statements::read_from_snapshot`]): one
/// statement, so the snapshot found and the rows read agree. The subquery finds the snapshot in
/// the partial index `events_snapshots` (the last entry of the session's, whose condition names
/// the same literal kind); the rows are a range of the primary key.
pub(super) fn from_snapshot_sql(s: &str) -> String {
    format!(
        "SELECT seq, record FROM {s}.events
         WHERE session = $1 AND seq >= coalesce(
             (SELECT max(seq) FROM {s}.events WHERE session = $1 AND kind = 17), 0)
         ORDER BY seq"
    )
}

/// The append of a batch after seq 0 (see [`Statements::append`]).
fn append_sql(s: &str) -> String {
    let suspended = RunOutcome::Suspended.as_str();
    format!(
        "WITH head AS (
             UPDATE {s}.sessions SET next_seq = $3, token = $4, last_at = $9,
                 run_state = CASE WHEN $8 = 2 THEN $10 ELSE run_state END,
                 run_id = CASE WHEN $8 = 2 THEN $11 ELSE run_id END,
                 outcome = CASE WHEN $8 = 2 THEN $12 ELSE outcome END,
                 answered = CASE
                     WHEN $8 = 2 THEN $13
                     WHEN $8 = 1 THEN answered
                         OR coalesce(run_state = 2 AND outcome = '{suspended}', false)
                     ELSE answered END
             WHERE session = $1 AND next_seq = $2
             RETURNING 1
         ), {}",
        insert_events(s)
    )
}

/// The append of a batch at seq 0 (see [`Statements::append_new`]).
fn append_new_sql(s: &str) -> String {
    format!(
        "WITH head AS (
             INSERT INTO {s}.sessions AS h
                 (session, next_seq, token, last_at, run_state, run_id, outcome, answered)
             SELECT $1, $3, $4, $9, $10, $11, $12, $13 WHERE $2 = 0
             ON CONFLICT (session) DO UPDATE
                 SET next_seq = excluded.next_seq, token = excluded.token,
                     last_at = excluded.last_at, run_state = excluded.run_state,
                     run_id = excluded.run_id, outcome = excluded.outcome,
                     answered = excluded.answered
                 WHERE h.next_seq = 0
             RETURNING 1
         ), {}",
        insert_events(s)
    )
}

/// The events' insert of an append, run only when the head CTE moved a row.
fn insert_events(s: &str) -> String {
    format!(
        "ev AS (
             INSERT INTO {s}.events (session, seq, at, kind, record)
             SELECT $1, $2 + u.n - 1, u.at, u.kind, u.record
             FROM unnest($5::int8[], $6::int2[], $7::bytea[])
                  WITH ORDINALITY AS u(at, kind, record, n)
             WHERE EXISTS (SELECT 1 FROM head)
             RETURNING 1
         )
         SELECT count(*) FROM ev"
    )
}

impl Statements {
    /// The statements for schema `s`, prepared on `client`; behind a transaction pooler
    /// (`pooled`), kept as text and sent unnamed each time.
    pub(crate) async fn prepare(
        client: &Client,
        s: &str,
        pooled: bool,
    ) -> Result<Self, tokio_postgres::Error> {
        let p = |sql: String, types: &'static [Type]| async move {
            let prepared =
                if pooled { None } else { Some(client.prepare_typed(&sql, types).await?) };
            Ok::<_, tokio_postgres::Error>(Stmt { sql, types, prepared })
        };
        const APPEND: &[Type] = &[
            Type::TEXT,
            Type::INT8,
            Type::INT8,
            Type::BYTEA,
            Type::INT8_ARRAY,
            Type::INT2_ARRAY,
            Type::BYTEA_ARRAY,
            Type::INT2,
            Type::INT8,
            Type::INT2,
            Type::TEXT,
            Type::TEXT,
            Type::BOOL,
        ];
        const TEXT: &[Type] = &[Type::TEXT];
        const TEXT3: &[Type] = &[Type::TEXT, Type::TEXT, Type::TEXT];
        Ok(Statements {
            append: p(append_sql(s), APPEND).await?,
            append_new: p(append_new_sql(s), APPEND).await?,
            tail: p(format!("SELECT next_seq FROM {s}.sessions WHERE session = $1"), TEXT).await?,
            read: p(
                format!(
                    "SELECT seq, record FROM {s}.events
                     WHERE session = $1 AND seq >= $2 AND seq < $3 ORDER BY seq"
                ),
                &[Type::TEXT, Type::INT8, Type::INT8],
            )
            .await?,
            read_from_snapshot: p(from_snapshot_sql(s), TEXT).await?,
            sessions: p(
                format!("SELECT session FROM {s}.sessions WHERE next_seq > 0 ORDER BY session"),
                &[],
            )
            .await?,
            lock_head: p(
                format!("SELECT next_seq, token FROM {s}.sessions WHERE session = $1 FOR UPDATE"),
                TEXT,
            )
            .await?,
            head: p(format!("SELECT next_seq, token FROM {s}.sessions WHERE session = $1"), TEXT)
                .await?,
            claim_head: p(
                format!(
                    "INSERT INTO {s}.sessions (session, next_seq) VALUES ($1, 0)
                     ON CONFLICT (session) DO NOTHING"
                ),
                TEXT,
            )
            .await?,
            delete_events: p(format!("DELETE FROM {s}.events WHERE session = $1"), TEXT).await?,
            trim_events: p(
                format!("DELETE FROM {s}.events WHERE session = $1 AND seq < $2"),
                &[Type::TEXT, Type::INT8],
            )
            .await?,
            delete_head: p(format!("DELETE FROM {s}.sessions WHERE session = $1"), TEXT).await?,
            heads: p(
                format!(
                    "SELECT {HEAD_COLUMNS}, {NOW_MS} FROM {s}.sessions
                     WHERE next_seq > 0 ORDER BY session"
                ),
                &[],
            )
            .await?,
            head_row: p(
                format!(
                    "SELECT {HEAD_COLUMNS}, {NOW_MS} FROM {s}.sessions
                     WHERE session = $1 AND next_seq > 0"
                ),
                TEXT,
            )
            .await?,
            lock_lease: p(
                format!(
                    "SELECT lease_owner, lease_run, lease_expires, {NOW_MS} FROM {s}.sessions
                     WHERE session = $1 FOR UPDATE"
                ),
                TEXT,
            )
            .await?,
            insert_lease: p(
                format!(
                    "INSERT INTO {s}.sessions (session, next_seq, last_at, run_state, answered,
                         lease_owner, lease_run, lease_expires)
                     VALUES ($1, 0, 0, 0, false, $2, $3, {NOW_MS} + $4)
                     ON CONFLICT (session) DO NOTHING
                     RETURNING lease_expires"
                ),
                &[Type::TEXT, Type::TEXT, Type::TEXT, Type::INT8],
            )
            .await?,
            set_lease: p(
                format!(
                    "UPDATE {s}.sessions SET lease_owner = $2, lease_run = $3, lease_expires = $4
                     WHERE session = $1"
                ),
                &[Type::TEXT, Type::TEXT, Type::TEXT, Type::INT8],
            )
            .await?,
            renew_leases: p(
                format!(
                    "UPDATE {s}.sessions AS h SET lease_expires = {NOW_MS} + $3
                     FROM unnest($2::text[], $4::text[]) AS r(session, run)
                     WHERE h.session = r.session AND h.lease_owner = $1 AND h.lease_run = r.run
                     RETURNING h.session"
                ),
                &[Type::TEXT, Type::TEXT_ARRAY, Type::INT8, Type::TEXT_ARRAY],
            )
            .await?,
            release_lease: p(
                format!(
                    "UPDATE {s}.sessions
                     SET lease_owner = NULL, lease_run = NULL, lease_expires = NULL
                     WHERE session = $1 AND lease_owner = $2 AND lease_run = $3"
                ),
                TEXT3,
            )
            .await?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many times `sql` modifies table `t` of schema `s`.
    fn modifications(sql: &str, s: &str, t: &str) -> usize {
        ["UPDATE", "INSERT INTO", "DELETE FROM"]
            .iter()
            .map(|verb| sql.matches(&format!("{verb} {s}.{t}")).count())
            .sum()
    }

    #[test]
    fn the_read_from_a_snapshot_names_the_snapshot_kind() {
        let condition = format!("kind = {})", stepjournal_codec::EventKind::Snapshot.code());
        assert!(from_snapshot_sql("\"j\"").contains(&condition));
    }

    #[test]
    fn an_append_modifies_each_table_once() {
        // Defect: the append updated the `sessions` row in one CTE and inserted it in another,
        // two modifications of one table in one statement, which CockroachDB refuses.
        for sql in [append_sql("\"j\""), append_new_sql("\"j\"")] {
            assert_eq!(modifications(&sql, "\"j\"", "sessions"), 1, "{sql}");
            assert_eq!(modifications(&sql, "\"j\"", "events"), 1, "{sql}");
        }
    }
}
