//! The SQLite backend's rows: synced appends from 1 and 16 sessions, buffered appends from 1
//! and 16 sessions, each on a fresh database file in the run's directory.

use stepjournal_backends::Durability;
use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};

use crate::appends::measure;
use crate::args::WorkDir;
use crate::table::{Baseline, Row, Table};

/// The workloads of the SQL backends' rows: (durability, concurrent sessions), one event of
/// 256 bytes of text per append.
pub const WORKLOADS: [(Durability, usize); 4] = [
    (Durability::Synced, 1),
    (Durability::Synced, 16),
    (Durability::Buffered, 1),
    (Durability::Buffered, 16),
];

/// A row's workload name, the file backend's way.
pub fn workload(durability: Durability, sessions: usize) -> String {
    let plural = if sessions == 1 { "" } else { "s" };
    match durability {
        Durability::Synced => format!("Synced, {sessions} session{plural}"),
        _ => format!("Buffered, {sessions} session{plural}, 1 event/append"),
    }
}

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    for (durability, sessions) in WORKLOADS {
        let dir = work.sub(&format!("sqlite-{}-{sessions}", durability.as_str()))?;
        let store = SqliteStore::open(dir.join("journal.sqlite"), SqliteOptions::default())
            .map_err(|e| format!("sqlite: {e}"))?;
        let m = measure(&store, "bench", sessions, 1, durability, work.budget())?;
        let synced = durability == Durability::Synced;
        table.push(Row {
            group: "sqlite",
            workload: workload(durability, sessions),
            rate: if synced { m.appends_per_sec() } else { m.events_per_sec() },
            unit: if synced { "appends/s" } else { "events/s" },
            p50_us: Some(m.p50_us()),
            p99_us: Some(m.p99_us()),
            fsyncs_per_append: None,
            baseline: Baseline::FsyncLoop,
            note: if synced {
                "WAL, synchronous=FULL; concurrent appends share a transaction".to_owned()
            } else {
                "WAL, synchronous=NORMAL: synced only at checkpoints".to_owned()
            },
        });
    }
    Ok(())
}
