//! The simulated disk's files and directory operations: [`Io`] and [`IoFile`] over its state.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use super::{Inode, Op, OpKind, SimDisk, power_lost, write_into};
use crate::file::io::{EntryKind, Io, IoFile, IoLock};

#[derive(Debug)]
struct SimFile {
    disk: SimDisk,
    ino: u64,
    path: PathBuf,
    read_only: bool,
}

fn read_only_error() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, "the file was opened read-only")
}

impl IoFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let state = self.disk.lock();
        if state.crashed {
            return Err(power_lost());
        }
        let data = state.inodes.get(&self.ino).map(|f| f.written.as_slice()).unwrap_or_default();
        let from = data.get(offset.min(data.len() as u64) as usize..).unwrap_or_default();
        let n = from.len().min(buf.len());
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), from.get(..n)) {
            dst.copy_from_slice(src);
        }
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if self.read_only {
            return Err(read_only_error());
        }
        let mut state = self.disk.lock();
        SimDisk::begin(&mut state, OpKind::Write, &self.path)?;
        let f = state.inodes.entry(self.ino).or_default();
        write_into(&mut f.written, offset, buf);
        state.pending.push(Op::Write {
            ino: self.ino,
            path: self.path.clone(),
            offset,
            data: buf.to_vec(),
        });
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut state = self.disk.lock();
        if state.syncs_held {
            state.syncs_waiting += 1;
            self.disk.gate.notify_all();
            while state.syncs_held {
                state = self.disk.gate.wait(state).unwrap_or_else(PoisonError::into_inner);
            }
            state.syncs_waiting -= 1;
        }
        SimDisk::begin(&mut state, OpKind::SyncData, &self.path)?;
        let (mine, rest): (Vec<Op>, Vec<Op>) = std::mem::take(&mut state.pending)
            .into_iter()
            .partition(|op| op.ino() == Some(self.ino));
        state.pending = rest;
        let f = state.inodes.entry(self.ino).or_default();
        for op in mine {
            match op {
                Op::Write { offset, data, .. } => write_into(&mut f.synced, offset, &data),
                Op::SetLen { len, .. } => f.synced.resize(len as usize, 0),
                Op::Create { .. } | Op::Remove { .. } => {}
            }
        }
        debug_assert_eq!(f.synced, f.written, "a synced file's two images agree");
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        if self.read_only {
            return Err(read_only_error());
        }
        let mut state = self.disk.lock();
        SimDisk::begin(&mut state, OpKind::SetLen, &self.path)?;
        state.inodes.entry(self.ino).or_default().written.resize(len as usize, 0);
        state.pending.push(Op::SetLen { ino: self.ino, path: self.path.clone(), len });
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let state = self.disk.lock();
        if state.crashed {
            return Err(power_lost());
        }
        Ok(state.inodes.get(&self.ino).map_or(0, |f| f.written.len() as u64))
    }
}

#[derive(Debug)]
struct SimLock {
    disk: SimDisk,
    path: PathBuf,
    /// Which lock file at `path` it holds (see [`SimDisk::replace_lock_file`]).
    generation: u64,
}

impl IoLock for SimLock {
    fn is_current(&self) -> io::Result<bool> {
        let state = self.disk.lock();
        if state.crashed {
            return Err(power_lost());
        }
        Ok(state.locks.get(&self.path) == Some(&self.generation))
    }
}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut state = self.disk.lock();
        if state.locks.get(&self.path) == Some(&self.generation) {
            state.locks.remove(&self.path);
        }
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{}: no such file", path.display()))
}

impl Io for SimDisk {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        if state.crashed {
            return Err(power_lost());
        }
        for d in dir.ancestors() {
            state.dirs.insert(d.to_path_buf());
        }
        Ok(())
    }

    fn create_new(&self, path: &Path) -> io::Result<Arc<dyn IoFile>> {
        let mut state = self.lock();
        if path.parent().is_some_and(|d| !d.as_os_str().is_empty() && !state.dirs.contains(d)) {
            return Err(not_found(path.parent().unwrap_or(path)));
        }
        if state.dir.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: file exists", path.display()),
            ));
        }
        SimDisk::begin(&mut state, OpKind::Create, path)?;
        let ino = state.next_ino;
        state.next_ino += 1;
        state.inodes.insert(ino, Inode::default());
        state.dir.insert(path.to_path_buf(), ino);
        state.pending.push(Op::Create { ino, path: path.to_path_buf() });
        drop(state);
        Ok(Arc::new(SimFile {
            disk: self.clone(),
            ino,
            path: path.to_path_buf(),
            read_only: false,
        }))
    }

    fn open(&self, path: &Path, read_only: bool) -> io::Result<Arc<dyn IoFile>> {
        let state = self.lock();
        if state.crashed {
            return Err(power_lost());
        }
        if state.forbidden.contains(path) {
            let what = format!("{}: permission denied (simulated)", path.display());
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, what));
        }
        if let Some(kind) = state.specials.get(path) {
            return Err(match kind {
                EntryKind::DanglingLink => not_found(path),
                _ => io::Error::other(format!(
                    "{}: the simulated disk does not open {kind}",
                    path.display()
                )),
            });
        }
        let ino = *state.dir.get(path).ok_or_else(|| not_found(path))?;
        drop(state);
        Ok(Arc::new(SimFile { disk: self.clone(), ino, path: path.to_path_buf(), read_only }))
    }

    fn entry_kind(&self, path: &Path) -> io::Result<Option<EntryKind>> {
        let state = self.lock();
        if state.crashed {
            return Err(power_lost());
        }
        if let Some(kind) = state.specials.get(path) {
            return Ok(Some(*kind));
        }
        Ok(state.dir.contains_key(path).then_some(EntryKind::File))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        if !state.dir.contains_key(path) {
            return Err(not_found(path));
        }
        SimDisk::begin(&mut state, OpKind::Remove, path)?;
        state.dir.remove(path);
        state.pending.push(Op::Remove { path: path.to_path_buf() });
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let state = self.lock();
        if state.crashed {
            return Err(power_lost());
        }
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let names = state
            .dir
            .keys()
            .chain(state.specials.keys())
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_owned))
            .filter(|n| !state.unlisted.contains(n))
            .collect();
        drop(state);
        if let Some(then) = self.take_after_list() {
            then();
        }
        Ok(names)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        SimDisk::begin(&mut state, OpKind::SyncDir, dir)?;
        let in_dir = |p: &Path| p.parent() == Some(dir);
        let (mine, rest): (Vec<Op>, Vec<Op>) =
            std::mem::take(&mut state.pending).into_iter().partition(|op| match op {
                Op::Create { path, .. } | Op::Remove { path } => in_dir(path),
                Op::Write { .. } | Op::SetLen { .. } => false,
            });
        state.pending = rest;
        for op in mine {
            match op {
                Op::Create { ino, path } => {
                    state.dir_synced.insert(path, ino);
                }
                Op::Remove { path } => {
                    state.dir_synced.remove(&path);
                }
                Op::Write { .. } | Op::SetLen { .. } => {}
            }
        }
        Ok(())
    }

    fn lock_is_held(&self, path: &Path) -> io::Result<bool> {
        let state = self.lock();
        if state.crashed {
            return Err(power_lost());
        }
        Ok(state.locks.contains_key(path))
    }

    fn try_lock(&self, path: &Path) -> io::Result<Option<Box<dyn IoLock>>> {
        let mut state = self.lock();
        if state.crashed {
            return Err(power_lost());
        }
        if state.locks.contains_key(path) {
            return Ok(None);
        }
        state.lock_generation += 1;
        let generation = state.lock_generation;
        state.locks.insert(path.to_path_buf(), generation);
        drop(state);
        Ok(Some(Box::new(SimLock { disk: self.clone(), path: path.to_path_buf(), generation })))
    }
}
