//! The SQLite backend's rows: its contender in the synced groups, and buffered appends from 1
//! and 8 sessions, each on a fresh database file in the run's directory.

use std::path::Path;
use std::sync::Arc;

use stepjournal_backends::Durability;
use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};

use crate::appends::{event, on_store};
use crate::args::WorkDir;
use crate::synced::Contender;
use crate::table::Table;

/// The sessions of the SQL backends' buffered rows (one 256-byte event per append).
pub const BUFFERED_SESSIONS: [usize; 2] = [1, 8];

fn open(path: &Path) -> Result<SqliteStore, String> {
    SqliteStore::open(path, SqliteOptions::default()).map_err(|e| format!("sqlite: {e}"))
}

/// The key of the SQLite backend's row for `bytes`-byte events from `threads` sessions.
pub fn key(bytes: usize, threads: usize, durability: Durability) -> String {
    format!("sqlite.{}.{bytes}.{threads}", durability.as_str())
}

/// stepjournal's SQLite backend in a synced group.
pub fn contender(
    dir: &Path,
    bytes: usize,
    threads: usize,
    durability: Durability,
) -> Result<Contender, String> {
    let store = Arc::new(open(&dir.join("stepjournal.sqlite"))?);
    let events = [event(bytes)];
    Ok(Contender::new(
        "sqlite",
        key(bytes, threads, durability),
        String::new(),
        "WAL, synchronous=FULL; appends waiting for a transaction share the next one",
        Box::new(move |round, budget| {
            Ok((on_store(&*store, round, threads, &events, durability, budget)?, None))
        }),
    ))
}

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    for sessions in BUFFERED_SESSIONS {
        let dir = work.sub(&format!("sqlite-buffered-{sessions}"))?;
        let store = open(&dir.join("stepjournal.sqlite"))?;
        let m = on_store(&store, 0, sessions, &[event(256)], Durability::Buffered, work.budget())?;
        drop(store);
        table.push(crate::file::buffered_row(
            "sqlite",
            &m,
            sessions,
            1,
            None,
            "WAL, synchronous=NORMAL: synced only at checkpoints",
        ));
        work.clear(&dir);
    }
    Ok(())
}
