//! The command line, and the directory every workload runs in.

use std::path::{Path, PathBuf};
use std::time::Duration;

pub const USAGE: &str = "usage: stepjournal-bench [--quick] [--dir DIR] [--json FILE]";

/// What the command line asked for.
#[derive(Debug, Clone, Default)]
pub struct Args {
    /// Short runs and a small journal (for CI).
    pub quick: bool,
    /// Where to run (default: a new directory under the system's temporary directory).
    pub dir: Option<PathBuf>,
    /// Where to write the rows as JSON.
    pub json: Option<PathBuf>,
}

impl Args {
    pub fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut args = Args::default();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--quick" => args.quick = true,
                "--dir" => args.dir = Some(it.next().ok_or("--dir needs a directory")?.into()),
                "--json" => args.json = Some(it.next().ok_or("--json needs a file")?.into()),
                "-h" | "--help" => return Err("help".to_owned()),
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        Ok(args)
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
        let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
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

    /// How long a timed workload runs.
    pub fn budget(&self) -> Duration {
        if self.quick { Duration::from_millis(400) } else { Duration::from_secs(3) }
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
