//! The operating system's files: `pread`/`pwrite`, `fdatasync`, `flock`.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{EntryKind, Io, IoFile, IoLock};

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealIo;

/// Calls `op` again while it fails with `EINTR` (a signal arrived before it did anything). The
/// standard library does so itself for `pwrite`, `fdatasync`, `ftruncate` and `open`, not for
/// `unlink`, `statx`, `opendir` or `getdents`, which go through here.
fn again<T>(mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match op() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

#[derive(Debug)]
struct RealFile(File);

impl IoFile for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        // `fdatasync` on Linux.
        self.0.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(again(|| self.0.metadata())?.len())
    }
}

#[derive(Debug)]
struct RealLock {
    // The lock is held while the file is open; closing it releases the lock.
    _file: File,
    path: PathBuf,
    /// The locked file's device and inode.
    id: (u64, u64),
}

/// A file's device and inode.
fn file_id(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

impl IoLock for RealLock {
    fn is_current(&self) -> io::Result<bool> {
        match again(|| std::fs::metadata(&self.path)) {
            Ok(meta) => Ok(file_id(&meta) == self.id),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl Io for RealIo {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn IoFile>> {
        let f = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        Ok(Arc::new(RealFile(f)))
    }

    fn open(&self, path: &Path, read_only: bool) -> io::Result<Arc<dyn IoFile>> {
        let f = OpenOptions::new().read(true).write(!read_only).open(path)?;
        Ok(Arc::new(RealFile(f)))
    }

    fn entry_exists(&self, path: &Path) -> io::Result<bool> {
        match again(|| std::fs::symlink_metadata(path)) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn entry_kind(&self, path: &Path) -> io::Result<Option<EntryKind>> {
        let kind = match again(|| std::fs::metadata(path)) {
            Ok(meta) => meta.file_type(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // The entry may be a link whose target is missing.
                return match again(|| std::fs::symlink_metadata(path)) {
                    Ok(_) => Ok(Some(EntryKind::DanglingLink)),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(e),
                };
            }
            Err(e) => return Err(e),
        };
        Ok(Some(if kind.is_file() {
            EntryKind::File
        } else if kind.is_dir() {
            EntryKind::Other("a directory")
        } else if kind.is_fifo() {
            EntryKind::Other("a named pipe (FIFO)")
        } else if kind.is_socket() {
            EntryKind::Other("a socket")
        } else if kind.is_block_device() || kind.is_char_device() {
            EntryKind::Other("a device")
        } else {
            EntryKind::Other("not a regular file")
        }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        again(|| std::fs::remove_file(path))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        // Interrupted part way, the listing starts again: a directory stream cannot be resumed
        // after a failed `getdents`.
        again(|| {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(dir)? {
                let entry = entry?;
                if let Ok(name) = entry.file_name().into_string() {
                    names.push(name);
                }
            }
            Ok(names)
        })
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn try_lock(&self, path: &Path) -> io::Result<Option<Box<dyn IoLock>>> {
        /// How many times a lock held only shared (by a reader asking whether a writer is live,
        /// for microseconds), or a lock file replaced while it was being locked, is tried again.
        const TRIES: u32 = 200;
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        for _ in 0..TRIES {
            match file.try_lock() {
                Ok(()) => {
                    let lock = RealLock {
                        id: file_id(&file.metadata()?),
                        _file: file,
                        path: path.to_path_buf(),
                    };
                    if lock.is_current()? {
                        return Ok(Some(Box::new(lock)));
                    }
                    // The file was removed or replaced between opening and locking it: the lock
                    // keeps no one out. Lock the file at the path now.
                    drop(lock);
                    file = OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create(true)
                        .truncate(false)
                        .open(path)?;
                    continue;
                }
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) => return Err(e),
            }
            // Held: by a writer (exclusive, so a shared lock is refused too), or by readers
            // looking (shared).
            match file.try_lock_shared() {
                Ok(()) => file.unlock()?,
                Err(TryLockError::WouldBlock) => return Ok(None),
                Err(TryLockError::Error(e)) => return Err(e),
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "the lock file kept being replaced or looked at while it was being locked",
        ))
    }

    fn lock_is_held(&self, path: &Path) -> io::Result<bool> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        // A shared lock is refused only while an exclusive one is held; it is released when the
        // file is closed, at once.
        match file.try_lock_shared() {
            Ok(()) => Ok(false),
            Err(TryLockError::WouldBlock) => Ok(true),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupted_call_is_made_again_and_other_failures_are_not() {
        // unlink, statx, opendir and getdents interrupted by a signal failed the store's work
        // with EINTR instead of being made again, as pwrite and fdatasync are.
        let mut calls = 0;
        let got = again(|| {
            calls += 1;
            if calls < 3 { Err(io::Error::from(io::ErrorKind::Interrupted)) } else { Ok(calls) }
        });
        assert_eq!(got.unwrap(), 3);
        let mut calls = 0;
        let got: io::Result<()> = again(|| {
            calls += 1;
            Err(io::Error::from(io::ErrorKind::NotFound))
        });
        assert_eq!((got.unwrap_err().kind(), calls), (io::ErrorKind::NotFound, 1));
    }
}
