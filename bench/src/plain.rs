//! Plain SQLite as users run it, the baseline of the "10x plain SQLite" target: a WAL-mode
//! database, `synchronous=FULL` (or `NORMAL`), the same table as stepjournal's SQLite backend
//! (`events (session, seq, at, kind, record)`, primary key `(session, seq)`, `WITHOUT ROWID`,
//! the record bytes in `record`), and one transaction per append holding its `INSERT`s. No
//! group commit, no tail check (the primary key refuses a duplicate): what an application
//! writing its own event table does. The baseline's threads share one connection behind a
//! mutex, the fastest plain way; a connection per thread (as a pool hands out) is measured too,
//! where its threads contend for the write lock through SQLite's sleeping busy handler.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, ErrorCode, params};
use stepjournal_codec::{Limits, Seq, record};

use crate::appends::{Work, event, measure, session};
use crate::turns::Contender;

/// The `synchronous` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    /// The WAL synced at every commit: survives a loss of power.
    Full,
    /// The WAL synced only at checkpoints: survives a crash of the process only.
    Normal,
}

impl Sync {
    fn name(self) -> &'static str {
        match self {
            Sync::Full => "FULL",
            Sync::Normal => "NORMAL",
        }
    }
}

/// The key of the plain `FULL` row for `bytes`-byte events from `threads` threads: the SQLite
/// baseline of every durable row with those.
pub fn full_key(bytes: usize, threads: usize) -> String {
    format!("plain.full.{bytes}.{threads}")
}

/// The key of the plain `NORMAL` row for `bytes`-byte events from `threads` threads, `per_tx`
/// events per transaction: the SQLite baseline of the `Buffered` rows with those.
pub fn normal_key(bytes: usize, threads: usize, per_tx: usize) -> String {
    format!("plain.normal.{bytes}.{threads}.x{per_tx}")
}

fn failed(what: &str) -> impl Fn(rusqlite::Error) -> String + '_ {
    move |e| format!("plain sqlite: {what}: {e}")
}

/// Opens the database at `path` the way an application does.
pub fn open(path: &Path, sync: Sync) -> Result<Connection, String> {
    let conn = Connection::open(path).map_err(failed("opening the database"))?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(failed("switching to WAL"))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(format!("plain sqlite: {} stays in journal mode {mode}", path.display()));
    }
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {};
         PRAGMA busy_timeout = 5000;
         CREATE TABLE IF NOT EXISTS events (
             session TEXT NOT NULL,
             seq INTEGER NOT NULL,
             at INTEGER NOT NULL,
             kind INTEGER NOT NULL,
             record BLOB NOT NULL,
             PRIMARY KEY (session, seq)
         ) WITHOUT ROWID;",
        sync.name()
    ))
    .map_err(failed("creating the table"))?;
    Ok(conn)
}

/// Appends `records` (one per event) to `session` from `first`, in one transaction.
fn append(
    conn: &mut Connection,
    session: &str,
    first: i64,
    records: &[Vec<u8>],
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO events (session, seq, at, kind, record) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        for (k, r) in records.iter().enumerate() {
            let kind = r.get(9).copied().unwrap_or_default();
            stmt.execute(params![session, first + k as i64, 1_700_000_000_000i64, kind, r])?;
        }
    }
    tx.commit()
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// How the threads reach the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// One connection behind a mutex: the baseline.
    Shared,
    /// A connection per thread, waiting for the write lock in SQLite's busy handler.
    PerThread,
}

/// Plain SQLite in a synced group: `threads` threads, each appending one `bytes`-byte event per
/// transaction to its own session.
pub fn contender(
    dir: &Path,
    bytes: usize,
    threads: usize,
    sync: Sync,
    sharing: Sharing,
) -> Result<Contender, String> {
    contender_batched(dir, bytes, threads, 1, sync, sharing)
}

/// Plain SQLite: `threads` threads, each appending `per_tx` `bytes`-byte events per transaction
/// to its own session. Keyed by [`full_key`] (`FULL`, one event per transaction) or
/// [`normal_key`] (`NORMAL`, shared).
pub fn contender_batched(
    dir: &Path,
    bytes: usize,
    threads: usize,
    per_tx: usize,
    sync: Sync,
    sharing: Sharing,
) -> Result<Contender, String> {
    let name = sync.name();
    let lower = name.to_lowercase();
    let (path, key, connections) = match (sharing, sync) {
        (Sharing::Shared, Sync::Full) => (
            dir.join(format!("plain-{lower}.sqlite")),
            format!("plain.{lower}.{bytes}.{threads}"),
            "one shared connection",
        ),
        (Sharing::Shared, Sync::Normal) => (
            dir.join(format!("plain-{lower}.sqlite")),
            normal_key(bytes, threads, per_tx),
            "one shared connection",
        ),
        (Sharing::PerThread, _) => (
            dir.join(format!("plain-{lower}-per-thread.sqlite")),
            format!("plain.{lower}.per-thread.{bytes}.{threads}"),
            "a connection per thread (busy_timeout 5 s)",
        ),
    };
    let per_tx = per_tx.max(1);
    let shared = Arc::new(Mutex::new(open(&path, sync)?));
    let busy = Arc::new(AtomicU64::new(0));
    let busy_seen = Arc::clone(&busy);
    let ev = event(bytes);
    let durable = match sync {
        Sync::Full => "",
        Sync::Normal => " (not durable against a loss of power)",
    };
    let note =
        format!("WAL, synchronous={name}{durable}, one transaction per append, {connections}");
    let plural = if threads == 1 { "" } else { "s" };
    let batched =
        if per_tx == 1 { String::new() } else { format!(", {per_tx} events/transaction") };
    let workload = match sharing {
        Sharing::Shared => {
            format!("synchronous={name}, {bytes} B events, {threads} session{plural}{batched}")
        }
        Sharing::PerThread => format!(
            "synchronous={name}, {bytes} B events, {threads} session{plural}{batched}, \
             connection per thread"
        ),
    };
    Ok(Contender::new(
        "plain sqlite",
        key,
        workload,
        &note,
        Box::new(move |round, budget| {
            let work = Work { events: per_tx as u64, bytes: (bytes * per_tx) as u64 };
            let m = measure(threads, budget, work, |i| {
                let s = session(round, i);
                let (shared, ev, busy) = (&shared, &ev, &busy);
                let mut own = match sharing {
                    Sharing::Shared => None,
                    Sharing::PerThread => Some(open(&path, sync)?),
                };
                let mut seq = 0i64;
                let mut bufs = vec![Vec::new(); per_tx];
                let limits = Limits::default();
                Ok(move || {
                    for (k, buf) in bufs.iter_mut().enumerate() {
                        buf.clear();
                        let at = Seq(seq as u64 + k as u64);
                        record::encode_into(buf, &s, at, ev.at, &ev.event, &limits)
                            .map_err(|e| format!("plain sqlite: encoding: {e}"))?;
                    }
                    let records = bufs.as_slice();
                    // An append that waited out the busy timeout is retried, as an application
                    // would, and counted; its latency includes the wait.
                    loop {
                        let result = match own.as_mut() {
                            Some(conn) => append(conn, s.as_str(), seq, records),
                            None => {
                                let mut conn = shared.lock().unwrap_or_else(|p| p.into_inner());
                                append(&mut conn, s.as_str(), seq, records)
                            }
                        };
                        match result {
                            Ok(()) => break,
                            Err(e) if is_busy(&e) => {
                                busy.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => return Err(format!("plain sqlite: appending to {s}: {e}")),
                        }
                    }
                    seq += per_tx as i64;
                    Ok(())
                })
            })?;
            Ok((m, None))
        }),
    )
    .remark(Box::new(move || {
        let n = busy_seen.load(Ordering::Relaxed);
        (n > 0).then(|| format!("{n} appends waited out the busy timeout and were retried"))
    })))
}
