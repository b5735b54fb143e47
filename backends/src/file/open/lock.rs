//! The journal's writer lock: taken by a writable open (which creates the directory if it has
//! to), and asked about without being taken.

use std::io;
use std::path::Path;

use super::io_error;
use crate::OpenError;
use crate::file::format::layout::LOCK_FILE;
use crate::file::io::{Io, IoLock};

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

/// Whether a writer holds the lock of the journal in `dir` now (asked without taking it, and
/// without creating the lock file: `false` when there is none).
pub(in crate::file) fn is_held(io: &dyn Io, dir: &Path) -> io::Result<bool> {
    io.lock_is_held(&dir.join(LOCK_FILE))
}
