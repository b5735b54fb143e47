//! The PostgreSQL backend's contender, against the server named by `STEPJOURNAL_PG_URL`, in a
//! fresh schema dropped after: in the synced groups and the buffered groups of one event per
//! append (one connection per session). Without the variable there are no rows. In the synced
//! groups, beside it when the environment names them: the same server through a transaction
//! pooler (`STEPJOURNAL_PG_POOLED_URL`), and a primary with a synchronous standby
//! (`STEPJOURNAL_PG_STANDBY_URL`; `bench/pg-standby.sh` starts one).

use std::sync::Arc;

use stepjournal_backends::Durability;
use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};

use crate::appends::{event, on_store};
use crate::turns::Contender;

/// The server's URL, if the environment names one.
pub fn url() -> Option<String> {
    std::env::var("STEPJOURNAL_PG_URL").ok().filter(|u| !u.is_empty())
}

/// How a contender reaches its server.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `STEPJOURNAL_PG_URL`.
    Direct,
    /// The same server through a transaction pooler (PgBouncer in transaction mode):
    /// `STEPJOURNAL_PG_POOLED_URL`, given `?pooler=transaction` here.
    Pooled,
    /// A primary whose commits wait for a synchronous standby (`synchronous_standby_names`,
    /// `synchronous_commit = on`): `STEPJOURNAL_PG_STANDBY_URL`.
    Standby,
}

impl Via {
    /// The URL the environment names for this way, if it names one.
    fn url(self) -> Option<String> {
        let var = match self {
            Via::Direct => return url(),
            Via::Pooled => "STEPJOURNAL_PG_POOLED_URL",
            Via::Standby => "STEPJOURNAL_PG_STANDBY_URL",
        };
        let url = std::env::var(var).ok().filter(|u| !u.is_empty())?;
        if self == Via::Pooled {
            let sep = if url.contains('?') { '&' } else { '?' };
            return Some(format!("{url}{sep}pooler=transaction"));
        }
        Some(url)
    }

    /// The group of its rows.
    pub fn group(self) -> &'static str {
        match self {
            Via::Direct => "postgres",
            Via::Pooled => "postgres pooled",
            Via::Standby => "postgres standby",
        }
    }

    /// The key of its row in a synced or buffered group.
    pub fn key(self, durability: Durability, bytes: usize, threads: usize) -> String {
        let way = match self {
            Via::Direct => "",
            Via::Pooled => "pooled.",
            Via::Standby => "standby.",
        };
        format!("postgres.{way}{}.{bytes}.{threads}", durability.as_str())
    }

    fn note(self) -> &'static str {
        match self {
            Via::Direct => "",
            Via::Pooled => "; through PgBouncer in transaction mode, statements unnamed",
            Via::Standby => {
                "; each commit waits until a synchronous standby on this machine flushed it"
            }
        }
    }
}

fn connect(url: &str, name: &str, pool: usize) -> Result<PostgresStore, String> {
    let mut options = PostgresOptions::default();
    options.schema = format!("stepjournal_bench_{}_{name}", std::process::id());
    options.pool_size = pool;
    PostgresStore::connect(url, options).map_err(|e| format!("postgres: {e}"))
}

/// stepjournal's PostgreSQL backend in a synced group (or a buffered one, directly), reached
/// `via` the server the environment names; `None` when it names none.
pub fn contender(
    via: Via,
    bytes: usize,
    threads: usize,
    durability: Durability,
) -> Result<Option<Contender>, String> {
    let Some(url) = via.url() else { return Ok(None) };
    let key = via.key(durability, bytes, threads);
    let store = Arc::new(connect(&url, &key.replace('.', "_"), threads)?);
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
    let note = format!("{note}{}", via.note());
    let contender = Contender::new(
        via.group(),
        key,
        String::new(),
        &note,
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
