//! The PostgreSQL backend's rows, against the server named by `STEPJOURNAL_PG_URL`, each in a
//! fresh schema dropped after: its contender in the synced groups (one connection per session)
//! and buffered appends. Without the variable there are no rows, and the run says so.

use std::sync::Arc;

use stepjournal_backends::Durability;
use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};

use crate::appends::{event, on_store};
use crate::args::WorkDir;
use crate::synced::Contender;
use crate::table::Table;

/// The server's URL, if the environment names one.
pub fn url() -> Option<String> {
    std::env::var("STEPJOURNAL_PG_URL").ok().filter(|u| !u.is_empty())
}

fn connect(url: &str, name: &str, pool: usize) -> Result<PostgresStore, String> {
    let mut options = PostgresOptions::default();
    options.schema = format!("stepjournal_bench_{}_{name}", std::process::id());
    options.pool_size = pool;
    PostgresStore::connect(url, options).map_err(|e| format!("postgres: {e}"))
}

/// stepjournal's PostgreSQL backend in a synced group, when a server is named.
pub fn contender(
    bytes: usize,
    threads: usize,
    durability: Durability,
) -> Result<Option<Contender>, String> {
    let Some(url) = url() else { return Ok(None) };
    let store = Arc::new(connect(&url, &format!("{bytes}_{threads}"), threads)?);
    let events = [event(bytes)];
    let kept = Arc::clone(&store);
    let contender = Contender::new(
        "postgres",
        format!("postgres.{}.{bytes}.{threads}", durability.as_str()),
        String::new(),
        "synchronous_commit=on, one connection per session; the WAL synced on the server's disk",
        Box::new(move |round, budget| {
            Ok((on_store(&*store, round, threads, &events, durability, budget)?, None))
        }),
    );
    Ok(Some(contender.finish(Box::new(move || {
        let store = Arc::try_unwrap(kept)
            .map_err(|_| "the store is still in use: its schema is left".to_owned())?;
        store.drop_schema().map_err(|e| format!("postgres: {e}"))
    }))))
}

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let Some(url) = url() else {
        eprintln!("stepjournal-bench: STEPJOURNAL_PG_URL is not set: no PostgreSQL rows");
        return Ok(());
    };
    for sessions in crate::sqlite::BUFFERED_SESSIONS {
        let store = connect(&url, &format!("buffered_{sessions}"), sessions)?;
        let measured =
            on_store(&store, 0, sessions, &[event(256)], Durability::Buffered, work.budget());
        store.drop_schema().map_err(|e| format!("postgres: {e}"))?;
        table.push(crate::file::buffered_row(
            "postgres",
            &measured?,
            sessions,
            1,
            None,
            "synchronous_commit=off: the WAL flushed in the background",
        ));
    }
    Ok(())
}
