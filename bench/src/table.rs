//! The table every workload adds its rows to, printed once at the end and written as JSON.
//!
//! A row's rate and median latency are also shown as ratios to a raw baseline measured in the
//! same run and directory: appends against the raw `write` + `fdatasync` loop, opening against a
//! raw sequential read of the same files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Which raw baseline a row is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// The raw loop of `write` + `fdatasync` of 256-byte records.
    FsyncLoop,
    /// A raw sequential read of the same bytes.
    SequentialRead,
}

/// One measured row.
#[derive(Debug, Clone)]
pub struct Row {
    /// The workload group (`raw`, `file`, `sqlite`, ...).
    pub group: &'static str,
    /// What was measured.
    pub workload: String,
    /// The rate measured.
    pub rate: f64,
    /// Its unit (`appends/s`, `events/s`, `GB/s`).
    pub unit: &'static str,
    /// Median latency of one operation, microseconds.
    pub p50_us: Option<f64>,
    /// 99th-percentile latency, microseconds.
    pub p99_us: Option<f64>,
    /// `fdatasync` calls per append.
    pub fsyncs_per_append: Option<f64>,
    /// What the ratios compare with.
    pub baseline: Baseline,
    /// Anything a reader needs to read the figure right.
    pub note: String,
}

/// The rows of one run.
#[derive(Debug)]
pub struct Table {
    dir: PathBuf,
    quick: bool,
    rows: Vec<Row>,
}

fn fmt_rate(v: f64, unit: &str) -> String {
    if unit == "GB/s" {
        format!("{v:.2} {unit}")
    } else if v >= 1e6 {
        format!("{:.2}M {unit}", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k {unit}", v / 1e3)
    } else {
        format!("{v:.0} {unit}")
    }
}

fn fmt_us(v: Option<f64>) -> String {
    match v {
        Some(us) if us >= 1000.0 => format!("{:.2} ms", us / 1000.0),
        Some(us) => format!("{us:.0} µs"),
        None => "-".to_owned(),
    }
}

impl Table {
    pub fn new(dir: &Path, quick: bool) -> Table {
        Table { dir: dir.to_path_buf(), quick, rows: Vec::new() }
    }

    pub fn push(&mut self, row: Row) {
        self.rows.push(row);
    }

    fn baseline(&self, b: Baseline) -> Option<&Row> {
        let name = match b {
            Baseline::FsyncLoop => RAW_FSYNC,
            Baseline::SequentialRead => RAW_READ,
        };
        self.rows.iter().find(|r| r.group == "raw" && r.workload == name)
    }

    /// `(rate / baseline rate, p50 / baseline p50)`.
    fn ratios(&self, row: &Row) -> (Option<f64>, Option<f64>) {
        let Some(base) = self.baseline(row.baseline) else { return (None, None) };
        let rate = (base.rate > 0.0).then(|| row.rate / base.rate);
        let p50 = match (row.p50_us, base.p50_us) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        (rate, p50)
    }

    /// The table as text.
    pub fn render(&self) -> String {
        let header = [
            "workload",
            "rate",
            "p50",
            "p99",
            "fsyncs/append",
            "rate vs raw",
            "p50 vs raw",
            "note",
        ];
        let mut lines: Vec<[String; 8]> = Vec::new();
        for r in &self.rows {
            let (rate, p50) = self.ratios(r);
            let x = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}x"));
            lines.push([
                format!("{}: {}", r.group, r.workload),
                fmt_rate(r.rate, r.unit),
                fmt_us(r.p50_us),
                fmt_us(r.p99_us),
                r.fsyncs_per_append.map_or("-".to_owned(), |f| format!("{f:.3}")),
                x(rate),
                x(p50),
                r.note.clone(),
            ]);
        }
        let mut widths = header.map(|h| h.chars().count());
        for l in &lines {
            for (w, c) in widths.iter_mut().zip(l) {
                *w = (*w).max(c.chars().count());
            }
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "stepjournal-bench{} in {}",
            if self.quick { " --quick" } else { "" },
            self.dir.display()
        );
        let row = |out: &mut String, cells: &[String]| {
            let mut line = String::from("|");
            for (c, w) in cells.iter().zip(widths) {
                let pad = w - c.chars().count();
                let _ = write!(line, " {c}{} |", " ".repeat(pad));
            }
            let _ = writeln!(out, "{line}");
        };
        row(&mut out, &header.map(str::to_owned));
        row(&mut out, &widths.map(|w| "-".repeat(w)));
        for l in &lines {
            row(&mut out, l);
        }
        out
    }

    /// The rows as a JSON array.
    pub fn to_json(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                let (rate_ratio, p50_ratio) = self.ratios(r);
                serde_json::json!({
                    "group": r.group,
                    "workload": r.workload,
                    "rate": r.rate,
                    "unit": r.unit,
                    "p50_us": r.p50_us,
                    "p99_us": r.p99_us,
                    "fsyncs_per_append": r.fsyncs_per_append,
                    "baseline": match r.baseline {
                        Baseline::FsyncLoop => RAW_FSYNC,
                        Baseline::SequentialRead => RAW_READ,
                    },
                    "rate_vs_raw": rate_ratio,
                    "p50_vs_raw": p50_ratio,
                    "note": r.note,
                })
            })
            .collect();
        serde_json::json!({ "quick": self.quick, "dir": self.dir.display().to_string(), "rows": rows })
    }

    pub fn write_json(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(&self.to_json()).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// The raw `write` + `fdatasync` loop's workload name.
pub const RAW_FSYNC: &str = "write + fdatasync loop, 256-byte records";
/// The raw sequential read's workload name.
pub const RAW_READ: &str = "sequential read of the open row's files";
