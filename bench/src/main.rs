//! The side-by-side benchmark: one table, every row measured in the same run and directory,
//! each beside the disk's own limit, plain SQLite as applications run it, and its peers.
//!
//! `cargo run --release -p stepjournal-bench -- [--quick] [--only PARTS] [--dir DIR] [--json FILE]`
//! (or `--count OP N`, for counting instructions under callgrind)
//!
//! Each workload group is a module that adds its rows to the [`table::Table`]; the table prints
//! the raw rows first, as the physical limits every other row is compared with.

mod appends;
mod args;
mod async_file;
mod buffered;
mod cache;
mod cohort;
mod compaction;
mod count;
mod drive;
mod file;
mod fold;
mod heap;
mod long;
mod long_fold;
mod long_session;
mod long_timer;
mod open;
mod plain;
mod postgres;
mod procio;
mod raw;
mod raw_shared;
mod reads;
mod reclaim;
mod recovery;
mod sqlite;
mod switches;
mod synced;
mod table;
mod turns;
mod wal;
mod writer;

use std::process::ExitCode;

/// The system allocator, counting live bytes for the long rows' memory figures.
#[global_allocator]
static ALLOCATOR: heap::Counting = heap::Counting;

fn main() -> ExitCode {
    let args = match args::Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("stepjournal-bench: {e}\n\n{}", args::HELP);
            return ExitCode::from(2);
        }
    };
    if args.help {
        print!("{}", args::HELP);
        return ExitCode::SUCCESS;
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stepjournal-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One line on the machine: cores, memory, kernel, load average.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(format!("{:.1} GiB", kib / (1 << 20) as f64))
        })
        .unwrap_or_else(|| "? GiB".to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned());
    format!("{cores} cores, {mem}, kernel {kernel}, load average {load} at the start")
}

/// A module's rows: run its workloads and add their rows to the table.
type Workloads = fn(&args::WorkDir, &mut table::Table) -> Result<(), String>;

fn run(args: &args::Args) -> Result<(), String> {
    let work = args::WorkDir::new(args)?;
    if let Some((op, n)) = &args.count {
        return count::run(op, *n, &work);
    }
    if postgres::url().is_none() {
        eprintln!("stepjournal-bench: STEPJOURNAL_PG_URL is not set: no PostgreSQL rows");
    }
    let info = table::RunInfo {
        quick: args.quick,
        build: if cfg!(debug_assertions) { "debug" } else { "release" },
        dir: work.path().display().to_string(),
        machine: machine(),
        scaled: work.scaled(),
    };
    eprintln!("stepjournal-bench: running in {} ({})", info.dir, info.machine);
    let mut table = table::Table::new(info);
    let parts: [(&str, Workloads); 12] = [
        ("synced", synced::rows),
        ("raw", raw::rows),
        ("buffered", buffered::rows),
        ("writer", writer::rows),
        ("open", open::rows),
        ("reads", reads::rows),
        ("recovery", fold::rows),
        ("drive", drive::rows),
        ("recovery", recovery::rows),
        ("compaction", compaction::rows),
        ("compaction", reclaim::rows),
        ("long", long::rows),
    ];
    for (name, part) in parts {
        if args.runs(name) {
            eprintln!("stepjournal-bench: {name}");
            part(&work, &mut table)?;
        }
    }
    print!("{}", table.render());
    let json = args.json_path();
    table.write_json(&json)?;
    eprintln!("stepjournal-bench: rows written to {}", json.display());
    Ok(())
}
