//! The journal's writer lock: taken by a writable open (which creates the directory if it has
//! to), and asked about without being taken: by a read-only open beside a live writer, by
//! [`FileStore::writer_is_live`](crate::file::FileStore::writer_is_live), and by anyone through
//! [`writer_is_live`].

use std::path::Path;

use super::io_error;
use crate::file::format::layout::LOCK_FILE;
use crate::file::io::{Io, IoLock, RealIo};
use crate::{OpenError, StoreError};

/// Creates the journal directory `dir` if it does not exist (its own entry made durable before
/// anything in it counts) and takes the writer lock on its `LOCK` file.
/// [`OpenError::Locked`] when another writer holds it.
pub(super) fn take(io: &dyn Io, dir: &Path) -> Result<Box<dyn IoLock>, OpenError> {
    let existed = io.list(dir).is_ok();
    io.create_dir_all(dir)
        .map_err(io_error(format!("creating the journal directory {}", dir.display())))?;
    if !existed {
        // The new directory's own entry must be durable before anything in it counts.
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        io.sync_dir(parent).map_err(io_error(format!("syncing directory {}", parent.display())))?;
    }
    let lock_path = dir.join(LOCK_FILE);
    match io.try_lock(&lock_path).map_err(io_error(format!("locking {}", lock_path.display())))? {
        Some(l) => Ok(l),
        None => Err(OpenError::Locked { dir: dir.to_path_buf(), lock: lock_path }),
    }
}

/// Whether a writer holds the lock of the journal in `dir` now, asked through `io` without
/// taking it for longer than the question and without creating the lock file (`false` when
/// there is none).
pub(in crate::file) fn is_held(io: &dyn Io, dir: &Path) -> Result<bool, StoreError> {
    let path = dir.join(LOCK_FILE);
    io.lock_is_held(&path).map_err(|source| StoreError::Io {
        context: format!("asking whether a writer holds {}", path.display()),
        source,
    })
}

/// Whether a writer holds the lock of the file journal in directory `dir` now: a process (or a
/// store) has it open for writing, so a run open in its log may be running rather than
/// crashed. The question [`FileStore::writer_is_live`](crate::file::FileStore::writer_is_live)
/// answers, for a caller with no store open: asked of the lock without taking it for longer
/// than the question, and without creating the lock file (`false` when there is none, as in a
/// directory that holds no journal).
pub fn writer_is_live(dir: &Path) -> Result<bool, StoreError> {
    is_held(&RealIo, dir)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::file::options::FileOptions;

    #[test]
    fn a_journal_is_live_while_a_writer_holds_it_and_asking_creates_no_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!writer_is_live(dir.path()).unwrap());
        assert!(!dir.path().join(LOCK_FILE).exists(), "asking created the lock file");
        let opened = super::super::open(Arc::new(RealIo), dir.path(), FileOptions::new()).unwrap();
        assert!(writer_is_live(dir.path()).unwrap());
        drop(opened);
        assert!(!writer_is_live(dir.path()).unwrap());
    }
}
