//! The one table every workload adds its rows to, printed once at the end and written as JSON.
//!
//! Each row may name two baselines measured in the same run and directory, by key: a raw row (the
//! disk's own limit: the `write` + `fdatasync` loop from the same number of threads, a `write` loop
//! without sync for `Buffered` rows, or a sequential read of the same files) and the plain SQLite
//! row with the same thread count and event size (`synchronous=FULL` for durable rows, `NORMAL` for
//! `Buffered` ones). Its rate and latencies are shown as ratios to both. A row may also name peers
//! (the ideal cohort, okaywal, the SQLite backend, the same workload without compaction), each
//! shown as a rate ratio, with the p99.9 ratio where the latencies time the same operation.

use std::fmt::Write as _;
use std::path::Path;

use hdrhistogram::Histogram;

/// Where a row is printed: the table is ordered by section, then by the order rows were added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    Raw,
    Synced,
    Buffered,
    Writer,
    Open,
    Recovery,
    Reads,
    Compaction,
    Long,
}

impl Section {
    fn name(self) -> &'static str {
        match self {
            Section::Raw => "raw",
            Section::Synced => "synced",
            Section::Buffered => "buffered",
            Section::Writer => "writer",
            Section::Open => "open",
            Section::Recovery => "recovery",
            Section::Reads => "reads",
            Section::Compaction => "compaction",
            Section::Long => "long",
        }
    }
}

/// Latency percentiles of one operation, microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

impl Latency {
    /// From a histogram of nanoseconds.
    pub fn of(hist: &Histogram<u64>) -> Latency {
        let us = |q| hist.value_at_quantile(q) as f64 / 1000.0;
        Latency { p50_us: us(0.5), p99_us: us(0.99), p999_us: us(0.999) }
    }
}

/// A baseline a row is compared with.
#[derive(Debug, Clone, PartialEq)]
pub struct Compare {
    /// The baseline row's key.
    pub key: String,
    /// The row's rate is multiplied by this before the ratio (a step of 10 appends against
    /// single appends: 10).
    pub scale: f64,
    /// Whether the latencies measure the same kind of operation, so that their ratio means
    /// something.
    pub latency: bool,
    /// Compare MB/s instead of the rates (rows whose units differ but whose bytes are the same).
    pub by_bytes: bool,
}

impl Compare {
    /// Rate and latency compared as they are.
    pub fn to(key: impl Into<String>) -> Compare {
        Compare { key: key.into(), scale: 1.0, latency: true, by_bytes: false }
    }

    /// Only the rate compared, multiplied by `scale`.
    pub fn rate_only(key: impl Into<String>, scale: f64) -> Compare {
        Compare { key: key.into(), scale, latency: false, by_bytes: false }
    }

    /// Only MB/s compared.
    pub fn bytes(key: impl Into<String>) -> Compare {
        Compare { key: key.into(), scale: 1.0, latency: false, by_bytes: true }
    }
}

/// One measured row.
#[derive(Debug, Clone)]
pub struct Row {
    pub section: Section,
    /// A stable name other rows use to compare with this one (`raw.fsync.prealloc.256`, ...).
    pub key: String,
    /// Who did the work (`raw`, `plain sqlite`, `file`, `sqlite`, `postgres`, `writer`).
    pub group: &'static str,
    /// What was measured.
    pub workload: String,
    /// The rate measured.
    pub rate: f64,
    /// Its unit (`appends/s`, `events/s`, `GB/s`, ...).
    pub unit: &'static str,
    /// Payload megabytes (10^6) per second, where bytes are meaningful.
    pub mb_per_sec: Option<f64>,
    /// Latency of one operation (the note says which).
    pub latency: Option<Latency>,
    /// `fdatasync` calls per append, where known.
    pub fsyncs_per_append: Option<f64>,
    /// How long the measured work ran, seconds.
    pub elapsed_s: f64,
    /// The raw baseline.
    pub vs_raw: Option<Compare>,
    /// The plain SQLite baseline (`FULL` for durable rows, `NORMAL` for `Buffered` ones).
    pub vs_sqlite: Option<Compare>,
    /// Further baselines, each with a short name for the table.
    pub peers: Vec<(&'static str, Compare)>,
    /// Bytes the process read (`rchar`) per byte of what it was asked for, where measured.
    pub read_per_byte: Option<f64>,
    /// Anything a reader needs to read the figure right.
    pub note: String,
    /// The 1-minute load average when the row was added.
    pub load: Option<f64>,
}

impl Row {
    pub fn new(
        section: Section,
        key: impl Into<String>,
        group: &'static str,
        workload: impl Into<String>,
        rate: f64,
        unit: &'static str,
        elapsed_s: f64,
    ) -> Row {
        Row {
            section,
            key: key.into(),
            group,
            workload: workload.into(),
            rate,
            unit,
            mb_per_sec: None,
            latency: None,
            fsyncs_per_append: None,
            elapsed_s,
            vs_raw: None,
            vs_sqlite: None,
            peers: Vec::new(),
            read_per_byte: None,
            note: String::new(),
            load: None,
        }
    }

    pub fn mb(mut self, mb_per_sec: f64) -> Row {
        self.mb_per_sec = Some(mb_per_sec);
        self
    }

    pub fn latency(mut self, latency: Latency) -> Row {
        self.latency = Some(latency);
        self
    }

    pub fn fsyncs(mut self, per_append: Option<f64>) -> Row {
        self.fsyncs_per_append = per_append;
        self
    }

    pub fn vs_raw(mut self, compare: Compare) -> Row {
        self.vs_raw = Some(compare);
        self
    }

    pub fn vs_sqlite(mut self, compare: Compare) -> Row {
        self.vs_sqlite = Some(compare);
        self
    }

    /// Another baseline, shown as `name` in the peers column.
    pub fn vs(mut self, name: &'static str, compare: Compare) -> Row {
        self.peers.push((name, compare));
        self
    }

    pub fn read_per_byte(mut self, ratio: f64) -> Row {
        self.read_per_byte = Some(ratio);
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }
}

/// A row's figures over a baseline's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Ratios {
    pub rate: Option<f64>,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
}

/// What the header says about the run.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub quick: bool,
    /// `release` or `debug`.
    pub build: &'static str,
    pub dir: String,
    /// One line on the machine (cores, memory, kernel, load at the start).
    pub machine: String,
    /// What the run scaled down, if anything.
    pub scaled: Option<String>,
}

/// The rows of one run.
#[derive(Debug)]
pub struct Table {
    info: RunInfo,
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

/// Microseconds as a short duration.
pub fn fmt_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else if us >= 10.0 {
        format!("{us:.0} µs")
    } else {
        format!("{us:.1} µs")
    }
}

fn fmt_ratio(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0}x"),
        Some(v) if v >= 10.0 => format!("{v:.1}x"),
        Some(v) if v >= 0.01 => format!("{v:.2}x"),
        Some(v) => format!("{v:.4}x"),
        None => "-".to_owned(),
    }
}

/// The 1-minute load average, if `/proc/loadavg` tells.
pub fn load_now() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

impl Table {
    pub fn new(info: RunInfo) -> Table {
        Table { info, rows: Vec::new() }
    }

    /// Adds a row, stamped with the load average now.
    pub fn push(&mut self, mut row: Row) {
        row.load = load_now();
        self.rows.push(row);
    }

    /// The rows in print order: by section, then as added.
    fn ordered(&self) -> Vec<&Row> {
        let mut rows: Vec<&Row> = self.rows.iter().collect();
        rows.sort_by_key(|r| r.section);
        rows
    }

    pub fn find(&self, key: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.key == key)
    }

    /// `row`'s figures over the baseline `compare` names; all `None` when it was not measured.
    pub fn ratios(&self, row: &Row, compare: Option<&Compare>) -> Ratios {
        let Some(c) = compare else { return Ratios::default() };
        let Some(base) = self.find(&c.key) else { return Ratios::default() };
        let div = |a: f64, b: f64| (b > 0.0 && a.is_finite()).then(|| a / b);
        let rate = if c.by_bytes {
            row.mb_per_sec.zip(base.mb_per_sec).and_then(|(a, b)| div(a, b))
        } else {
            div(row.rate * c.scale, base.rate)
        };
        let (mut p50, mut p99, mut p999) = (None, None, None);
        if c.latency
            && let (Some(a), Some(b)) = (row.latency, base.latency)
        {
            p50 = div(a.p50_us, b.p50_us);
            p99 = div(a.p99_us, b.p99_us);
            p999 = div(a.p999_us, b.p999_us);
        }
        Ratios { rate, p50, p99, p999 }
    }

    /// The table as text: a header on the run, the table, and how to read the ratios.
    pub fn render(&self) -> String {
        let header = [
            "workload",
            "rate",
            "MB/s",
            "p50",
            "p99",
            "p99.9",
            "fsyncs/append",
            "bytes read/byte",
            "rate vs raw",
            "p50 vs raw",
            "rate vs plain SQLite",
            "p50 vs plain SQLite",
            "rate vs peers",
            "load",
            "note",
        ];
        let mut lines: Vec<[String; 15]> = Vec::new();
        for r in self.ordered() {
            let raw = self.ratios(r, r.vs_raw.as_ref());
            let sql = self.ratios(r, r.vs_sqlite.as_ref());
            let lat = |f: fn(&Latency) -> f64| {
                r.latency.as_ref().map_or("-".to_owned(), |l| fmt_us(f(l)))
            };
            lines.push([
                format!("{}: {}", r.group, r.workload),
                fmt_rate(r.rate, r.unit),
                r.mb_per_sec.map_or("-".to_owned(), |m| format!("{m:.1}")),
                lat(|l| l.p50_us),
                lat(|l| l.p99_us),
                lat(|l| l.p999_us),
                r.fsyncs_per_append.map_or("-".to_owned(), |f| format!("{f:.3}")),
                r.read_per_byte.map_or("-".to_owned(), |x| format!("{x:.3}")),
                fmt_ratio(raw.rate),
                fmt_ratio(raw.p50),
                fmt_ratio(sql.rate),
                fmt_ratio(sql.p50),
                self.peers_cell(r),
                r.load.map_or("-".to_owned(), |l| format!("{l:.1}")),
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
        let info = &self.info;
        let _ = writeln!(
            out,
            "stepjournal-bench{} ({} build) in {}",
            if info.quick { " --quick" } else { "" },
            info.build,
            info.dir
        );
        let _ = writeln!(out, "machine: {}", info.machine);
        if let Some(scaled) = &info.scaled {
            let _ = writeln!(out, "scaled down: {scaled}");
        }
        let row = |out: &mut String, cells: &[String]| {
            let mut line = String::from("|");
            for (c, w) in cells.iter().zip(widths) {
                let pad = w - c.chars().count();
                let _ = write!(line, " {c}{} |", " ".repeat(pad));
            }
            let _ = writeln!(out, "{}", line.trim_end());
        };
        row(&mut out, &header.map(str::to_owned));
        row(&mut out, &widths.map(|w| "-".repeat(w)));
        for l in &lines {
            row(&mut out, l);
        }
        out.push_str(LEGEND);
        out
    }

    /// The peers column: each peer's rate ratio, and its p99.9 ratio where latencies compare.
    fn peers_cell(&self, r: &Row) -> String {
        if r.peers.is_empty() {
            return "-".to_owned();
        }
        let cells: Vec<String> = r
            .peers
            .iter()
            .map(|(name, c)| {
                let x = self.ratios(r, Some(c));
                match x.p999 {
                    Some(_) => {
                        format!("{name} {} (p99.9 {})", fmt_ratio(x.rate), fmt_ratio(x.p999))
                    }
                    None => format!("{name} {}", fmt_ratio(x.rate)),
                }
            })
            .collect();
        cells.join("; ")
    }

    /// The run and its rows as JSON, every ratio included.
    pub fn to_json(&self) -> serde_json::Value {
        let ratios = |r: &Row, c: Option<&Compare>| match c {
            None => serde_json::Value::Null,
            Some(c) => {
                let x = self.ratios(r, Some(c));
                serde_json::json!({
                    "key": c.key, "rate": x.rate, "p50": x.p50, "p99": x.p99, "p999": x.p999,
                })
            }
        };
        let rows: Vec<serde_json::Value> = self
            .ordered()
            .into_iter()
            .map(|r| {
                serde_json::json!({
                    "key": r.key,
                    "section": r.section.name(),
                    "group": r.group,
                    "workload": r.workload,
                    "rate": r.rate,
                    "unit": r.unit,
                    "mb_per_sec": r.mb_per_sec,
                    "p50_us": r.latency.map(|l| l.p50_us),
                    "p99_us": r.latency.map(|l| l.p99_us),
                    "p999_us": r.latency.map(|l| l.p999_us),
                    "fsyncs_per_append": r.fsyncs_per_append,
                    "elapsed_s": r.elapsed_s,
                    "load1": r.load,
                    "bytes_read_per_byte": r.read_per_byte,
                    "vs_raw": ratios(r, r.vs_raw.as_ref()),
                    "vs_plain_sqlite": ratios(r, r.vs_sqlite.as_ref()),
                    "vs_peers": r.peers.iter().map(|(name, c)| {
                        let mut v = ratios(r, Some(c));
                        v["name"] = serde_json::Value::from(*name);
                        v
                    }).collect::<Vec<_>>(),
                    "note": r.note,
                })
            })
            .collect();
        let info = &self.info;
        serde_json::json!({
            "quick": info.quick,
            "build": info.build,
            "dir": info.dir,
            "machine": info.machine,
            "scaled": info.scaled,
            "rows": rows,
        })
    }

    pub fn write_json(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(&self.to_json()).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

const LEGEND: &str = "\
rate vs raw: the row's rate over its raw baseline's (durable appends: the write + fdatasync loop \
of records the same size, one record per sync, from the same number of threads, each thread on a \
preallocated file of its own; Buffered appends: a write loop without sync from the same threads \
with as many records per write; open and recovery: a sequential read of the same files, by \
MB/s). rate vs plain SQLite: over plain SQLite, WAL, one transaction per append, from the same \
number of threads with events the same size: synchronous=FULL for durable rows, NORMAL (as many \
events per transaction as per append) for Buffered rows. rate vs peers: over the named rows \
(ideal cohort: the same threads on one raw preallocated file, every group holding all of them, \
one write and one fdatasync per group; okaywal; the SQLite backend; the same bystander without \
compaction), with the p99.9 ratio where both latencies time the same operation. Writer rows \
compare 10 appends per step. p50 ratios only where both latencies time the same operation. bytes \
read/byte: what the process read (rchar in /proc/self/io) over the bytes asked for (the note \
says which). MB/s counts record bytes. Rows whose note says \"turns\" ran in turns with the rest \
of their group, baselines included, in 100 ms slices, in an order shuffled every round, so that \
a drifting disk weighs on each alike; the others ran one after another, and their ratios carry \
the disk's drift too. load: the 1-minute load average as the row finished.
";

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> RunInfo {
        RunInfo {
            quick: true,
            build: "debug",
            dir: "/tmp/x".to_owned(),
            machine: "test".to_owned(),
            scaled: None,
        }
    }

    fn lat(p50: f64) -> Latency {
        Latency { p50_us: p50, p99_us: p50 * 2.0, p999_us: p50 * 3.0 }
    }

    #[test]
    fn ratios_compare_with_the_named_baselines_and_scale() {
        let mut t = Table::new(info());
        t.push(
            Row::new(Section::Raw, "raw", "raw", "loop", 1000.0, "writes/s", 1.0)
                .latency(lat(100.0)),
        );
        t.push(
            Row::new(Section::Synced, "plain", "plain sqlite", "full", 500.0, "appends/s", 1.0)
                .latency(lat(400.0)),
        );
        let row = Row::new(Section::Writer, "w", "writer", "steps", 200.0, "steps/s", 1.0)
            .latency(lat(1000.0))
            .vs_raw(Compare::to("raw"))
            .vs_sqlite(Compare::rate_only("plain", 10.0));
        let raw = t.ratios(&row, row.vs_raw.as_ref());
        assert_eq!(raw.rate, Some(0.2));
        assert_eq!(raw.p50, Some(10.0));
        assert_eq!(raw.p999, Some(10.0));
        let sql = t.ratios(&row, row.vs_sqlite.as_ref());
        assert_eq!(sql.rate, Some(4.0));
        assert_eq!(sql.p50, None);
        let missing = t.ratios(&row, Some(&Compare::to("absent")));
        assert_eq!(missing, Ratios::default());
    }

    #[test]
    fn byte_comparisons_use_mb_per_sec() {
        let mut t = Table::new(info());
        t.push(Row::new(Section::Raw, "read", "raw", "read", 2.0, "GB/s", 1.0).mb(2000.0));
        let row = Row::new(Section::Recovery, "rec", "file", "recovery", 5000.0, "sessions/s", 1.0)
            .mb(500.0)
            .vs_raw(Compare::bytes("read"));
        assert_eq!(t.ratios(&row, row.vs_raw.as_ref()).rate, Some(0.25));
    }

    #[test]
    fn peers_show_their_rate_ratio_and_their_tail_ratio_where_latencies_compare() {
        let mut t = Table::new(info());
        t.push(Row::new(Section::Raw, "ideal", "raw", "cohort", 1000.0, "appends/s", 1.0));
        t.push(
            Row::new(Section::Synced, "peer", "okaywal", "commit", 400.0, "appends/s", 1.0)
                .latency(lat(100.0)),
        );
        t.push(
            Row::new(Section::Synced, "row", "file", "synced", 800.0, "appends/s", 1.0)
                .latency(lat(50.0))
                .read_per_byte(1.25)
                .vs("ideal cohort", Compare::rate_only("ideal", 1.0))
                .vs("okaywal", Compare::to("peer")),
        );
        let text = t.render();
        assert!(text.contains("ideal cohort 0.80x; okaywal 2.00x (p99.9 0.50x)"), "{text}");
        assert!(text.contains("| 1.250 "), "{text}");
        let json = t.to_json();
        let row = &json["rows"][2];
        assert_eq!(row["bytes_read_per_byte"], 1.25);
        assert_eq!(row["vs_peers"][0]["name"], "ideal cohort");
        assert_eq!(row["vs_peers"][0]["rate"], 0.8);
        assert_eq!(row["vs_peers"][1]["p999"], 0.5);
    }

    #[test]
    fn rendering_orders_rows_by_section_and_json_holds_every_row() {
        let mut t = Table::new(info());
        t.push(Row::new(Section::Synced, "b", "file", "second", 1.0, "appends/s", 1.0));
        t.push(Row::new(Section::Raw, "a", "raw", "first", 1.0, "writes/s", 1.0));
        let text = t.render();
        let first = text.find("raw: first").unwrap_or(usize::MAX);
        let second = text.find("file: second").unwrap_or(0);
        assert!(first < second, "{text}");
        let json = t.to_json();
        let rows = json["rows"].as_array().map(Vec::len);
        assert_eq!(rows, Some(2));
        assert_eq!(json["rows"][0]["key"], "a");
        assert_eq!(json["rows"][1]["vs_raw"], serde_json::Value::Null);
    }
}
