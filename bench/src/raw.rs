//! The raw rows: what the disk does without stepjournal, the limits the other rows are
//! compared with.

use std::fs::OpenOptions;
use std::io::Write;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::args::WorkDir;
use crate::table::{Baseline, RAW_FSYNC, Row, Table};

/// A loop of `write` (256 bytes, appended) + `fdatasync` on one file, for the time budget.
pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("raw")?;
    let mut f = FsyncLoop::create(&dir.join("fsync-loop"))?;
    let (n, elapsed) = f.run(work.budget())?;
    table.push(Row {
        group: "raw",
        workload: RAW_FSYNC.to_owned(),
        rate: n as f64 / elapsed.as_secs_f64(),
        unit: "writes/s",
        p50_us: Some(f.hist.value_at_quantile(0.5) as f64 / 1000.0),
        p99_us: Some(f.hist.value_at_quantile(0.99) as f64 / 1000.0),
        fsyncs_per_append: Some(1.0),
        baseline: Baseline::FsyncLoop,
        note: "the physical limit of one durable append at a time".to_owned(),
    });
    Ok(())
}

/// The raw loop on one file; its latencies (nanoseconds) gather over every run.
#[derive(Debug)]
pub struct FsyncLoop {
    file: std::fs::File,
    pub hist: Histogram<u64>,
}

impl FsyncLoop {
    pub fn create(path: &std::path::Path) -> Result<FsyncLoop, String> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(FsyncLoop { file, hist: Histogram::<u64>::new(3).map_err(|e| e.to_string())? })
    }

    /// Runs the loop for `budget`; returns the writes done and the time taken.
    pub fn run(&mut self, budget: Duration) -> Result<(u64, Duration), String> {
        let record = [0x5au8; 256];
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < budget {
            let t = Instant::now();
            self.file.write_all(&record).map_err(|e| format!("write: {e}"))?;
            self.file.sync_data().map_err(|e| format!("fdatasync: {e}"))?;
            let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.hist.record(ns.max(1)).map_err(|e| e.to_string())?;
            n += 1;
        }
        Ok((n, start.elapsed()))
    }
}
