//! The PostgreSQL backend's contender, against the server named by `STEPJOURNAL_PG_URL`, in a
//! fresh schema dropped after: in the synced groups and the buffered groups of one event per
//! append (one connection per session). Without the variable there are no rows.

use std::sync::Arc;

use stepjournal_backends::Durability;
use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};

use crate::appends::{event, on_store};
use crate::turns::Contender;

/// The server's URL, if the environment names one.
pub fn url() -> Option<String> {
    std::env::var("STEPJOURNAL_PG_URL").ok().filter(|u| !u.is_empty())
}

/// The same server through a transaction pooler (PgBouncer in transaction mode), if the
/// environment names one: `STEPJOURNAL_PG_POOLED_URL`, given `?pooler=transaction` here.
pub fn pooled_url() -> Option<String> {
    let url = std::env::var("STEPJOURNAL_PG_POOLED_URL").ok().filter(|u| !u.is_empty())?;
    let sep = if url.contains('?') { '&' } else { '?' };
    Some(format!("{url}{sep}pooler=transaction"))
}

/// The key of the direct PostgreSQL row of a synced or buffered group.
pub fn key(durability: Durability, bytes: usize, threads: usize) -> String {
    format!("postgres.{}.{bytes}.{threads}", durability.as_str())
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
    on(&url, "postgres", key(durability, bytes, threads), bytes, threads, durability).map(Some)
}

/// The same through the transaction pooler `STEPJOURNAL_PG_POOLED_URL` names, if it names one
/// (group `postgres pooled`), in the same turns as the direct row.
pub fn pooled_contender(
    bytes: usize,
    threads: usize,
    durability: Durability,
) -> Result<Option<Contender>, String> {
    let Some(url) = pooled_url() else { return Ok(None) };
    let key = format!("postgres.pooled.{}.{bytes}.{threads}", durability.as_str());
    on(&url, "postgres pooled", key, bytes, threads, durability).map(Some)
}

fn on(
    url: &str,
    group: &'static str,
    key: String,
    bytes: usize,
    threads: usize,
    durability: Durability,
) -> Result<Contender, String> {
    let pooled = group.ends_with("pooled");
    let name =
        format!("{}{}_{bytes}_{threads}", if pooled { "pooled_" } else { "" }, durability.as_str());
    let url = url.to_owned();
    let store = Arc::new(connect(&url, &name, threads)?);
    let through =
        if pooled { "; through PgBouncer in transaction mode, statements unnamed" } else { "" };
    let events = [event(bytes)];
    let kept = Arc::clone(&store);
    let note = match durability {
        Durability::Synced => {
            "synchronous_commit=on, one connection per session; the WAL synced on the server's \
             disk"
        }
        _ => {
            "synchronous_commit=off: the WAL flushed in the background; one connection per \
              session"
        }
    };
    let note = format!("{note}{through}");
    let contender = Contender::new(
        group,
        key,
        String::new(),
        &note,
        Box::new(move |round, budget| {
            Ok((on_store(&*store, round, threads, &events, durability, budget)?, None))
        }),
    );
    Ok(contender.finish(Box::new(move || {
        let store = Arc::try_unwrap(kept)
            .map_err(|_| "the store is still in use: its schema is left".to_owned())?;
        store.drop_schema().map_err(|e| format!("postgres: {e}"))
    })))
}
