//! PostgreSQL rows of the side-by-side table: the same append workload as every backend
//! (see [`crate::sqlite::measure_appends`]), each in a fresh schema dropped after.

use std::time::Duration;

use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};

use crate::sqlite::{Row, WORKLOADS, measure_appends};

/// The PostgreSQL rows against the server at `url` (a libpq URL, e.g. from
/// `STEPJOURNAL_PG_URL`). The pool has one connection per session.
pub fn rows(url: &str, budget: Duration) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (durability, sessions) in WORKLOADS {
        let mut options = PostgresOptions::default();
        options.schema = format!("stepjournal_bench_{}", std::process::id());
        options.pool_size = sessions;
        let store = PostgresStore::connect(url, options).map_err(|e| format!("postgres: {e}"))?;
        let row = measure_appends("postgres", &store, "bench", sessions, durability, budget);
        store.drop_schema().map_err(|e| format!("postgres: {e}"))?;
        rows.push(row?);
    }
    Ok(rows)
}
