//! The PostgreSQL backend's rows: the SQLite rows' workloads against the server named by
//! `STEPJOURNAL_PG_URL`, each in a fresh schema dropped after. Without the variable there are
//! no rows, and the run says so.

use stepjournal_backends::Durability;
use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};

use crate::appends::measure;
use crate::args::WorkDir;
use crate::sqlite::{WORKLOADS, workload};
use crate::table::{Baseline, Row, Table};

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let Ok(url) = std::env::var("STEPJOURNAL_PG_URL") else {
        eprintln!("stepjournal-bench: STEPJOURNAL_PG_URL is not set: no PostgreSQL rows");
        return Ok(());
    };
    for (durability, sessions) in WORKLOADS {
        let mut options = PostgresOptions::default();
        options.schema = format!("stepjournal_bench_{}", std::process::id());
        options.pool_size = sessions;
        let store = PostgresStore::connect(&url, options).map_err(|e| format!("postgres: {e}"))?;
        let measured = measure(&store, "bench", sessions, 1, durability, work.budget());
        store.drop_schema().map_err(|e| format!("postgres: {e}"))?;
        let m = measured?;
        let synced = durability == Durability::Synced;
        table.push(Row {
            group: "postgres",
            workload: workload(durability, sessions),
            rate: if synced { m.appends_per_sec() } else { m.events_per_sec() },
            unit: if synced { "appends/s" } else { "events/s" },
            p50_us: Some(m.p50_us()),
            p99_us: Some(m.p99_us()),
            fsyncs_per_append: None,
            baseline: Baseline::FsyncLoop,
            note: if synced {
                "synchronous_commit=on, one connection per session; the server's disk".to_owned()
            } else {
                "synchronous_commit=off: WAL flushed in the background".to_owned()
            },
        });
    }
    Ok(())
}
