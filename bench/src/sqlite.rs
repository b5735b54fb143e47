//! The SQLite backend's contender in the synced groups and in the buffered groups of one event
//! per append from 1 and 8 sessions, each on a fresh database file in the group's directory.

use std::path::Path;
use std::sync::Arc;

use stepjournal_backends::Durability;
use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};

use crate::appends::{event, on_store};
use crate::turns::Contender;

fn open(path: &Path) -> Result<SqliteStore, String> {
    SqliteStore::open(path, SqliteOptions::default()).map_err(|e| format!("sqlite: {e}"))
}

/// The key of the SQLite backend's row for `bytes`-byte events from `threads` sessions.
pub fn key(bytes: usize, threads: usize, durability: Durability) -> String {
    format!("sqlite.{}.{bytes}.{threads}", durability.as_str())
}

/// stepjournal's SQLite backend in a synced or buffered group, one event per append.
pub fn contender(
    dir: &Path,
    bytes: usize,
    threads: usize,
    durability: Durability,
) -> Result<Contender, String> {
    let store = Arc::new(open(&dir.join("stepjournal.sqlite"))?);
    let events = [event(bytes)];
    let note = match durability {
        Durability::Synced => {
            "WAL, synchronous=FULL; appends waiting for a transaction share the next one"
        }
        _ => "WAL, synchronous=NORMAL: synced only at checkpoints",
    };
    Ok(Contender::new(
        "sqlite",
        key(bytes, threads, durability),
        String::new(),
        note,
        Box::new(move |round, budget| {
            Ok((on_store(&*store, round, threads, &events, durability, budget)?, None))
        }),
    ))
}
