//! The command line, and the directory every workload runs in.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The JSON file written when `--json` is not given, in the current directory.
pub const DEFAULT_JSON: &str = "stepjournal-bench.json";

pub const HELP: &str = "\
stepjournal-bench: every backend, plain SQLite as applications run it, and the disk's own limit,
measured side by side in one run and one directory, printed as one table with ratios.

usage: stepjournal-bench [--quick] [--only PARTS] [--dir DIR] [--json FILE]
       stepjournal-bench --count OP N [--dir DIR]

  --quick      short runs and a small journal (under a minute; CI runs it)
  --only PARTS run only these parts, comma-separated: synced, raw, buffered, writer, drive,
               open, recovery, reads, compaction, long (rows whose baseline is not run show no
               ratio to it)
  --dir DIR    run in a new directory stepjournal-bench-<pid> under DIR, removed at the end
               (default: the current directory)
  --json FILE  write every row, with all its ratios, as JSON to FILE
               (default: stepjournal-bench.json in the current directory)
  --count OP N do exactly N operations OP and nothing else timed, for counting instructions
               under `valgrind --tool=callgrind` (docs/perf.md): encode, decode, fold (events),
               append (Buffered appends of one 256-byte event to a file journal)

PostgreSQL rows run when STEPJOURNAL_PG_URL names a server (postgres://user@host:port/db).
";

/// What the command line asked for.
#[derive(Debug, Clone, Default)]
pub struct Args {
    /// Short runs and a small journal (for CI).
    pub quick: bool,
    /// Where to run (default: the current directory).
    pub dir: Option<PathBuf>,
    /// Where to write the rows as JSON (default [`DEFAULT_JSON`]).
    pub json: Option<PathBuf>,
    /// `--help` was asked for.
    pub help: bool,
    /// The parts to run (all when empty).
    pub only: Vec<String>,
    /// `--count OP N`: an operation of [`COUNT_OPS`] and how many times to do it.
    pub count: Option<(String, u64)>,
}

/// The parts `--only` can name.
pub const PARTS: [&str; 10] = [
    "synced",
    "raw",
    "buffered",
    "writer",
    "drive",
    "open",
    "recovery",
    "reads",
    "compaction",
    "long",
];

/// The operations `--count` can do.
pub const COUNT_OPS: [&str; 4] = ["encode", "decode", "fold", "append"];

/// How many sessions a full run recovers.
pub const RECOVERY_SESSIONS: usize = 100_000;

impl Args {
    pub fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut args = Args::default();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--quick" => args.quick = true,
                "--dir" => args.dir = Some(it.next().ok_or("--dir needs a directory")?.into()),
                "--json" => args.json = Some(it.next().ok_or("--json needs a file")?.into()),
                "--only" => {
                    let list = it.next().ok_or("--only needs a list of parts")?;
                    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                        if !PARTS.contains(&part) {
                            return Err(format!(
                                "--only: unknown part `{part}` (the parts: {})",
                                PARTS.join(", ")
                            ));
                        }
                        args.only.push(part.to_owned());
                    }
                }
                "--count" => {
                    let op = it.next().ok_or("--count needs an operation and a number")?;
                    if !COUNT_OPS.contains(&op.as_str()) {
                        return Err(format!(
                            "--count: unknown operation `{op}` (the operations: {})",
                            COUNT_OPS.join(", ")
                        ));
                    }
                    let n = it.next().ok_or("--count needs a number after the operation")?;
                    let n: u64 = n
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or(format!("--count: `{n}` is not a positive number"))?;
                    args.count = Some((op, n));
                }
                "-h" | "--help" => args.help = true,
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        Ok(args)
    }

    /// Whether `part` runs.
    pub fn runs(&self, part: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|p| p == part)
    }

    pub fn json_path(&self) -> PathBuf {
        self.json.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_JSON))
    }
}

/// A scratch directory for one run, removed at the end. Every workload gets its own
/// subdirectory of it, so they all run on the same file system.
#[derive(Debug)]
pub struct WorkDir {
    root: PathBuf,
    pub quick: bool,
}

impl WorkDir {
    pub fn new(args: &Args) -> Result<WorkDir, String> {
        let base = match &args.dir {
            Some(d) => d.clone(),
            None => std::env::current_dir()
                .map_err(|e| format!("cannot read the current directory: {e}"))?,
        };
        let root = base.join(format!("stepjournal-bench-{}", std::process::id()));
        std::fs::create_dir_all(&root)
            .map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        Ok(WorkDir { root, quick: args.quick })
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    /// A fresh, empty subdirectory.
    pub fn sub(&self, name: &str) -> Result<PathBuf, String> {
        let p = self.root.join(name);
        if p.exists() {
            std::fs::remove_dir_all(&p)
                .map_err(|e| format!("cannot clear {}: {e}", p.display()))?;
        }
        std::fs::create_dir_all(&p).map_err(|e| format!("cannot create {}: {e}", p.display()))?;
        Ok(p)
    }

    /// Removes a subdirectory whose workload is done, to keep the disk's use small.
    pub fn clear(&self, dir: &Path) {
        let _ = std::fs::remove_dir_all(dir);
    }

    /// How long a timed workload runs.
    pub fn budget(&self) -> Duration {
        if self.quick { Duration::from_millis(300) } else { Duration::from_secs(3) }
    }

    /// The segment size of the journals the open rows open: the default (64 MiB) in a full run;
    /// in `--quick`, a sixteenth of the smaller journal, so that it still has sealed segments.
    pub fn open_segment(&self) -> u64 {
        if self.quick { self.open_bytes() / 16 } else { 64 << 20 }
    }

    /// How large the journal opened by the open rows is.
    pub fn open_bytes(&self) -> u64 {
        match (self.quick, cfg!(debug_assertions)) {
            (false, _) => 1 << 30,
            (true, false) => 64 << 20,
            (true, true) => 16 << 20,
        }
    }

    /// How many sessions the tool executor's rows run at once on the file backend.
    pub fn drive_sessions(&self) -> usize {
        if self.quick { 100 } else { 10_000 }
    }

    /// How many sessions the recovery rows recover.
    pub fn recovery_sessions(&self) -> usize {
        match (self.quick, cfg!(debug_assertions)) {
            (false, _) => RECOVERY_SESSIONS,
            (true, false) => 10_000,
            (true, true) => 1_000,
        }
    }

    /// How many events the fold row folds, and in how many passes.
    pub fn fold_events(&self) -> (usize, usize) {
        match (self.quick, cfg!(debug_assertions)) {
            (false, _) => (1_000_000, 5),
            (true, false) => (1_000_000, 1),
            (true, true) => (100_000, 1),
        }
    }

    /// How large the journal of the interleaved read is.
    pub fn interleaved_bytes(&self) -> u64 {
        if self.quick { 4 << 20 } else { 64 << 20 }
    }

    /// How many bytes of events the reclaim rows' journals hold before the deletes.
    pub fn reclaim_bytes(&self) -> u64 {
        if self.quick { 48 << 20 } else { 640 << 20 }
    }

    /// The segment size of the reclaim rows' journals (the default's when not quick).
    pub fn reclaim_segment(&self) -> u64 {
        if self.quick { 4 << 20 } else { 64 << 20 }
    }

    /// The segment size of the compaction rows' journals.
    pub fn compaction_segment(&self) -> u64 {
        if self.quick { 1 << 20 } else { 8 << 20 }
    }

    /// The lengths, in steps, the long rows grow one session to.
    pub fn long_lengths(&self) -> &'static [u64] {
        if self.quick { &[10, 100, 1_000] } else { &[10, 100, 1_000, 10_000, 100_000] }
    }

    /// The longest the long rows grow the session without snapshots to.
    pub fn long_off_max(&self) -> u64 {
        if self.quick { 100 } else { 10_000 }
    }

    /// How many turns of wakes the long rows take at each length.
    pub fn long_rounds(&self) -> usize {
        if self.quick { 2 } else { 9 }
    }

    /// How many sessions of how many steps wake beside the long rows' timer.
    pub fn long_timer_sessions(&self) -> (usize, u64) {
        if self.quick { (10, 100) } else { (100, 2_000) }
    }

    /// What this build and mode scale down, for the header.
    pub fn scaled(&self) -> Option<String> {
        if !self.quick {
            return None;
        }
        let mut s = format!(
            "--quick: {} ms per workload, {} MiB journals of {} MiB segments to open, {} \
             sessions to recover, {} MiB segments to compact, a {} MiB journal to read \
             interleaved, {} events to fold, long sessions to {} steps ({} without snapshots), \
             {} sessions of {} steps woken beside the timer",
            self.budget().as_millis(),
            self.open_bytes() >> 20,
            self.open_segment() >> 20,
            self.recovery_sessions(),
            self.compaction_segment() >> 20,
            self.interleaved_bytes() >> 20,
            self.fold_events().0,
            self.long_lengths().last().copied().unwrap_or(0),
            self.long_off_max(),
            self.long_timer_sessions().0,
            self.long_timer_sessions().1
        );
        if cfg!(debug_assertions) {
            s.push_str(" (debug build: the figures say nothing of speed)");
        }
        Some(s)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        Args::parse(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn flags_and_paths_are_read() {
        let a = parse(&["--quick", "--dir", "/d", "--json", "out.json"]).unwrap_or_default();
        assert!(a.quick);
        assert_eq!(a.dir, Some(PathBuf::from("/d")));
        assert_eq!(a.json_path(), PathBuf::from("out.json"));
        assert_eq!(parse(&[]).unwrap_or_default().json_path(), PathBuf::from(DEFAULT_JSON));
    }

    #[test]
    fn a_missing_value_or_unknown_flag_is_refused() {
        assert!(parse(&["--dir"]).is_err());
        assert!(parse(&["--fast"]).is_err_and(|e| e.contains("--fast")));
        assert!(parse(&["--only", "synced,disk"]).is_err_and(|e| e.contains("`disk`")));
    }

    #[test]
    fn count_takes_a_known_operation_and_a_positive_number() {
        let a = parse(&["--count", "fold", "1000"]).unwrap_or_default();
        assert_eq!(a.count, Some(("fold".to_owned(), 1000)));
        assert!(parse(&["--count", "sort", "10"]).is_err_and(|e| e.contains("`sort`")));
        assert!(parse(&["--count", "encode", "0"]).is_err_and(|e| e.contains("`0`")));
        assert!(parse(&["--count", "encode"]).is_err());
    }

    #[test]
    fn only_names_the_parts_that_run() {
        let all = parse(&[]).unwrap_or_default();
        assert!(PARTS.iter().all(|p| all.runs(p)));
        let some = parse(&["--only", "open, recovery"]).unwrap_or_default();
        assert!(some.runs("open") && some.runs("recovery"));
        assert!(!some.runs("synced"));
    }
}
