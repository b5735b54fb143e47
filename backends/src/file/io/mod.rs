//! The I/O seam the file backend writes through, small enough to simulate, with both sides of
//! it: `real`, the operating system, and `sim`, the simulated disk.
//!
//! [`Io`] is a directory's worth of operations, [`IoFile`] an open file. [`RealIo`] is the
//! operating system; `sim::SimDisk` (feature `testing`, and the crate's own unit tests) is a
//! simulated disk that keeps what was written apart from what was synced, and can crash or fail
//! at any operation. Production builds hold no simulated disk.
//!
//! The backend relies on these promises, which both implementations keep:
//! - [`IoFile::write_all_at`] returning `Ok` means the bytes are visible to reads of the same
//!   file (a process crash keeps them); only [`IoFile::sync_data`] makes them survive a power loss.
//! - [`Io::create_new`] and [`Io::remove`] change the directory; only [`Io::sync_dir`] makes the
//!   change survive a power loss.
//! - Dropping a file or the `Io` flushes nothing.

mod real;
#[cfg(feature = "testing")]
pub mod sim;
#[cfg(all(test, not(feature = "testing")))]
#[expect(dead_code, reason = "the unit tests use a part of the simulated disk")]
pub(crate) mod sim;

use std::fmt::Debug;
use std::io;
use std::path::Path;
use std::sync::Arc;

pub use real::RealIo;

/// An open file: positional reads and writes, data sync, truncation.
#[cfg_attr(
    feature = "testing",
    expect(
        clippy::len_without_is_empty,
        reason = "the backend asks a file's length, never whether it is empty"
    )
)]
pub trait IoFile: Send + Sync + Debug {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (0 at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Makes every byte written so far (and the file's length) durable: `fdatasync`.
    fn sync_data(&self) -> io::Result<()>;

    /// Sets the file's length: cuts it, or extends it with zeros.
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// The file's current length.
    fn len(&self) -> io::Result<u64>;

    /// Reads exactly `buf.len()` bytes at `offset`, failing with `UnexpectedEof` if the file ends
    /// first.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the file ends before byte {}", offset + buf.len() as u64),
                    ));
                }
                Ok(n) => {
                    buf = buf.get_mut(n..).unwrap_or_default();
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// What an entry of a directory is, looked at without opening it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryKind {
    /// A regular file (itself, or through a symbolic link).
    File,
    /// A symbolic link to nothing.
    DanglingLink,
    /// Anything else, named: a directory, a named pipe, a socket, a device.
    Other(&'static str),
}

impl std::fmt::Display for EntryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EntryKind::File => "a regular file",
            EntryKind::DanglingLink => "a symbolic link to nothing",
            EntryKind::Other(what) => what,
        })
    }
}

/// A held exclusive lock; dropping it releases the lock.
pub trait IoLock: Send + Sync + Debug {
    /// Whether the file locked is still the one at the path it was locked by. A lock file
    /// removed (or replaced) under its holder lets another process lock a new file at that path:
    /// the holder's lock no longer keeps anyone out.
    fn is_current(&self) -> io::Result<bool>;
}

/// The directory operations the file backend needs.
pub trait Io: Send + Sync + Debug + 'static {
    /// Creates `dir` and its parents if they do not exist.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;

    /// Creates a new, empty file for reading and writing; fails if it exists.
    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn IoFile>>;

    /// Opens an existing file, for reading and writing unless `read_only`.
    fn open(&self, path: &Path, read_only: bool) -> io::Result<Arc<dyn IoFile>>;

    /// What the entry at `path` is, following symbolic links, without opening it (opening a
    /// named pipe would wait for a writer); `Ok(None)` when there is no such entry.
    fn entry_kind(&self, path: &Path) -> io::Result<Option<EntryKind>>;

    /// Whether there is an entry at `path`, of any kind (a dangling link included), not
    /// following links: one lookup, where [`entry_kind`](Self::entry_kind) of a missing entry
    /// takes two.
    fn entry_exists(&self, path: &Path) -> io::Result<bool> {
        Ok(self.entry_kind(path)?.is_some())
    }

    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;

    /// The names of the entries in `dir` (file names only, in no particular order).
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;

    /// Makes the directory's entries (files created and removed) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;

    /// Takes an exclusive lock on the file at `path`, creating it if needed, without waiting.
    /// `Ok(None)` when another holder has it (a holder that only looks, as
    /// [`lock_is_held`](Self::lock_is_held) does, is waited out briefly). The lock returned is on
    /// the file at `path` when it was taken ([`IoLock::is_current`]).
    fn try_lock(&self, path: &Path) -> io::Result<Option<Box<dyn IoLock>>>;

    /// Whether someone holds the exclusive lock on the file at `path`, found without creating
    /// the file or keeping any lock (`Ok(false)` when there is no such file).
    fn lock_is_held(&self, path: &Path) -> io::Result<bool>;
}
