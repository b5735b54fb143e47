//! The statements the store runs, prepared on each connection.

use postgres::types::Type;
use postgres::{Client, Statement};

/// The statements of one connection, prepared when it opens.
///
/// Each statement modifies a table at most once (CockroachDB refuses two modifications of one
/// table in a statement): an append moves the head row with one `UPDATE` (an existing session)
/// or one `INSERT ... ON CONFLICT DO UPDATE` (a batch at 0), and inserts the events.
#[derive(Debug)]
pub(crate) struct Statements {
    /// A batch after seq 0. `$1` session, `$2` expected, `$3` next, `$4` token, `$5` times,
    /// `$6` kinds, `$7` records. Moves the head row from `$2` to `$3`, setting its token, and
    /// inserts the events only if it moved. Returns the number of events inserted: all of
    /// them, or 0 when the tail was not `$2`.
    pub append: Statement,
    /// A batch at seq 0 (a new session), the parameters as for [`Statements::append`] with `$2`
    /// 0: inserts the head row (or moves one left at 0) and the events.
    pub append_new: Statement,
    /// `$1` session: the next sequence number, if the session exists.
    pub tail: Statement,
    /// `$1` session, `$2` start, `$3` end: `(seq, record)` in order.
    pub read: Statement,
    /// Every session with events, sorted.
    pub sessions: Statement,
    /// `$1` session: `(next_seq, token)` of its head row, locked (waiting for a writer that
    /// holds it).
    pub lock_head: Statement,
    /// `$1` session: `(next_seq, token)` of its head row, not locked.
    pub head: Statement,
    /// `$1` session: inserts a head row at 0 unless one exists, waiting for an uncommitted
    /// insert of the same session to end. Used only in a transaction rolled back after.
    pub claim_head: Statement,
    /// `$1` session: deletes its events.
    pub delete_events: Statement,
    /// `$1` session: deletes its head row.
    pub delete_head: Statement,
}

/// The append of a batch after seq 0 (see [`Statements::append`]).
fn append_sql(s: &str) -> String {
    format!(
        "WITH head AS (
             UPDATE {s}.sessions SET next_seq = $3, token = $4
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
             INSERT INTO {s}.sessions AS h (session, next_seq, token)
             SELECT $1, $3, $4 WHERE $2 = 0
             ON CONFLICT (session) DO UPDATE
                 SET next_seq = excluded.next_seq, token = excluded.token
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
    pub(crate) fn prepare(client: &mut Client, s: &str) -> Result<Self, postgres::Error> {
        let mut p = |sql: String, types: &[Type]| client.prepare_typed(&sql, types);
        let append_types = [
            Type::TEXT,
            Type::INT8,
            Type::INT8,
            Type::BYTEA,
            Type::INT8_ARRAY,
            Type::INT2_ARRAY,
            Type::BYTEA_ARRAY,
        ];
        Ok(Statements {
            append: p(append_sql(s), &append_types)?,
            append_new: p(append_new_sql(s), &append_types)?,
            tail: p(
                format!("SELECT next_seq FROM {s}.sessions WHERE session = $1"),
                &[Type::TEXT],
            )?,
            read: p(
                format!(
                    "SELECT seq, record FROM {s}.events
                     WHERE session = $1 AND seq >= $2 AND seq < $3 ORDER BY seq"
                ),
                &[Type::TEXT, Type::INT8, Type::INT8],
            )?,
            sessions: p(
                format!("SELECT session FROM {s}.sessions WHERE next_seq > 0 ORDER BY session"),
                &[],
            )?,
            lock_head: p(
                format!("SELECT next_seq, token FROM {s}.sessions WHERE session = $1 FOR UPDATE"),
                &[Type::TEXT],
            )?,
            head: p(
                format!("SELECT next_seq, token FROM {s}.sessions WHERE session = $1"),
                &[Type::TEXT],
            )?,
            claim_head: p(
                format!(
                    "INSERT INTO {s}.sessions (session, next_seq) VALUES ($1, 0)
                     ON CONFLICT (session) DO NOTHING"
                ),
                &[Type::TEXT],
            )?,
            delete_events: p(format!("DELETE FROM {s}.events WHERE session = $1"), &[Type::TEXT])?,
            delete_head: p(format!("DELETE FROM {s}.sessions WHERE session = $1"), &[Type::TEXT])?,
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
    fn an_append_modifies_each_table_once() {
        // Defect: the append updated the `sessions` row in one CTE and inserted it in another,
        // two modifications of one table in one statement, which CockroachDB refuses.
        for sql in [append_sql("\"j\""), append_new_sql("\"j\"")] {
            assert_eq!(modifications(&sql, "\"j\"", "sessions"), 1, "{sql}");
            assert_eq!(modifications(&sql, "\"j\"", "events"), 1, "{sql}");
        }
    }
}
