//! Who holds a database's write lock, where the operating system can tell: SQLite in WAL mode
//! writes under an exclusive POSIX lock on byte 120 of the `-shm` file (`WAL_WRITE_LOCK`, at
//! the start of its lock bytes), and Linux lists every such lock, with the process holding it,
//! in `/proc/locks`. SQLite itself only says "database is locked"; this says by whom.

use std::fmt;
use std::path::{Path, PathBuf};

/// The byte of the `-shm` file a WAL writer locks exclusively (SQLite's `UNIX_SHM_BASE` plus
/// `WAL_WRITE_LOCK`, 0).
const WRITE_LOCK_BYTE: u64 = 120;

/// Who holds a database's write lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteLock {
    /// Nobody: no process holds it.
    Free,
    /// The process of this id holds it (another process, or this one).
    HeldBy {
        /// The holder's process id.
        pid: u32,
    },
    /// The operating system does not say (no `/proc/locks`, or a lock it does not list).
    Unknown,
}

impl WriteLock {
    /// Whether another process than this one holds it.
    pub fn held_by_another(self) -> Option<u32> {
        match self {
            WriteLock::HeldBy { pid } if pid != std::process::id() => Some(pid),
            _ => None,
        }
    }
}

impl fmt::Display for WriteLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteLock::Free => f.write_str("no process holds its write lock"),
            WriteLock::HeldBy { pid } if *pid == std::process::id() => {
                f.write_str("another connection of this process holds its write lock")
            }
            WriteLock::HeldBy { pid } => {
                write!(f, "process {pid} holds its write lock (as /proc/locks says)")
            }
            WriteLock::Unknown => f.write_str(
                "another process or connection holds its write lock (the operating system does \
                 not say which)",
            ),
        }
    }
}

/// The database's `-shm` file.
fn shm_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-shm");
    PathBuf::from(name)
}

/// Who holds the write lock of the SQLite database at `db`, as `/proc/locks` lists it.
pub fn write_lock_holder(db: &Path) -> WriteLock {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(shm_of(db)) else {
        // No `-shm` file: no connection has the database open in WAL mode.
        return WriteLock::Free;
    };
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else { return WriteLock::Unknown };
    holder_in(&locks, meta.dev(), meta.ino())
}

/// The holder of the write lock byte of the file (`dev`, `ino`) among `locks` (the text of
/// `/proc/locks`: `ID: POSIX ADVISORY WRITE PID MAJ:MIN:INODE START END`, a waiter's line with
/// `->` after its id).
fn holder_in(locks: &str, dev: u64, ino: u64) -> WriteLock {
    let file = format!("{:02x}:{:02x}:{ino}", major(dev), minor(dev));
    for line in locks.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, kind, _, mode, pid, id, start, end] = fields.as_slice() else { continue };
        if *kind != "POSIX" || *mode != "WRITE" || *id != file {
            continue;
        }
        let Ok(start) = start.parse::<u64>() else { continue };
        let covers = match *end {
            "EOF" => start <= WRITE_LOCK_BYTE,
            end => {
                end.parse::<u64>().is_ok_and(|e| start <= WRITE_LOCK_BYTE && WRITE_LOCK_BYTE <= e)
            }
        };
        if covers && let Ok(pid) = pid.parse::<u32>() {
            return WriteLock::HeldBy { pid };
        }
    }
    WriteLock::Free
}

/// Linux's `major(dev)`.
fn major(dev: u64) -> u64 {
    ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)
}

/// Linux's `minor(dev)`.
fn minor(dev: u64) -> u64 {
    (dev & 0xff) | ((dev >> 12) & !0xff)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKS: &str = "\
1: POSIX  ADVISORY  READ 4242 fe:00:77 123 123
2: POSIX  ADVISORY  WRITE 4243 fe:00:78 120 120
3: -> POSIX  ADVISORY  WRITE 4244 fe:00:77 120 120
4: FLOCK  ADVISORY  WRITE 4245 fe:00:77 0 EOF
5: POSIX  ADVISORY  WRITE 4246 fe:00:77 120 120
";

    #[test]
    fn the_holder_is_the_process_with_a_write_lock_on_byte_120_of_that_file() {
        let dev = 0xfe << 8;
        assert_eq!(holder_in(LOCKS, dev, 77), WriteLock::HeldBy { pid: 4246 });
        assert_eq!(holder_in(LOCKS, dev, 78), WriteLock::HeldBy { pid: 4243 });
        assert_eq!(holder_in(LOCKS, dev, 79), WriteLock::Free);
        assert_eq!(holder_in(LOCKS, 0x0801, 77), WriteLock::Free, "another device");
        assert_eq!(holder_in("1: POSIX ADVISORY WRITE 7 fe:00:77 100 EOF", dev, 77), {
            WriteLock::HeldBy { pid: 7 }
        });
        assert_eq!(holder_in("garbage\n\n1: POSIX", dev, 77), WriteLock::Free);
    }
}
