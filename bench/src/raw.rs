//! The raw rows: what the disk does without stepjournal, the limits the other rows are
//! compared with.

use std::fs::OpenOptions;
use std::io::Write;
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::args::WorkDir;
use crate::table::{Baseline, RAW_FSYNC, Row, Table};

/// A loop of `write` (256 bytes, appended) + `fdatasync` on one file, for the time budget.
pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("raw")?;
    let path = dir.join("fsync-loop");
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let record = [0x5au8; 256];
    let mut hist = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let budget = work.budget();
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        let t = Instant::now();
        f.write_all(&record).map_err(|e| format!("write: {e}"))?;
        f.sync_data().map_err(|e| format!("fdatasync: {e}"))?;
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        hist.record(ns.max(1)).map_err(|e| e.to_string())?;
        n += 1;
    }
    let elapsed = start.elapsed();
    table.push(Row {
        group: "raw",
        workload: RAW_FSYNC.to_owned(),
        rate: n as f64 / elapsed.as_secs_f64(),
        unit: "writes/s",
        p50_us: Some(hist.value_at_quantile(0.5) as f64 / 1000.0),
        p99_us: Some(hist.value_at_quantile(0.99) as f64 / 1000.0),
        fsyncs_per_append: Some(1.0),
        baseline: Baseline::FsyncLoop,
        note: "the physical limit of one durable append at a time".to_owned(),
    });
    Ok(())
}
