//! A simulated disk for crash tests: every file keeps two images, what was written and what was
//! synced, and the disk can lose power at any operation or fail any one of them.
//!
//! What survives a power loss ([`SimDisk::crash`]): everything synced (file contents made durable
//! by [`IoFile::sync_data`], directory entries by [`Io::sync_dir`]), plus, for each operation
//! that was not yet synced, whatever its [`Fate`] says: kept, dropped entirely, or (for a write)
//! torn to any prefix of its bytes; unsynced operations may also land in another order than they
//! were issued. Dropping a file handle or the disk flushes nothing.
//!
//! Directories made with [`Io::create_dir_all`] are durable at once; locks are held in memory
//! and vanish with a crash, as a process's locks do.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

mod disk;

use super::EntryKind;
#[cfg(doc)]
use super::{Io, IoFile, IoLock};

/// The kinds of operation the disk counts (reads, listings and locks are not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// [`Io::create_new`].
    Create,
    /// [`IoFile::write_all_at`].
    Write,
    /// [`IoFile::sync_data`].
    SyncData,
    /// [`IoFile::set_len`].
    SetLen,
    /// [`Io::remove`].
    Remove,
    /// [`Io::sync_dir`].
    SyncDir,
}

/// An operation not yet synced when the power went out, as a crash's chooser sees it.
#[derive(Debug, Clone, Copy)]
pub enum PendingOp<'a> {
    /// A write of `len` bytes at `offset` into the file at `path`.
    Write {
        /// The file (its name when the write was issued).
        path: &'a Path,
        /// Where.
        offset: u64,
        /// How many bytes.
        len: usize,
    },
    /// A change of the file's length.
    SetLen {
        /// The file.
        path: &'a Path,
        /// The new length.
        len: u64,
    },
    /// A file created.
    Create {
        /// The file.
        path: &'a Path,
    },
    /// A file removed.
    Remove {
        /// The file.
        path: &'a Path,
    },
}

/// What becomes of one unsynced operation in a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// It reached the disk whole.
    Keep,
    /// It never reached the disk.
    Drop,
    /// Only the first `n` bytes of a write reached the disk (for other operations: [`Fate::Keep`]
    /// when `n > 0`, else [`Fate::Drop`]).
    Tear(usize),
}

#[derive(Debug, Clone)]
enum Op {
    Write { ino: u64, path: PathBuf, offset: u64, data: Vec<u8> },
    SetLen { ino: u64, path: PathBuf, len: u64 },
    Create { ino: u64, path: PathBuf },
    Remove { path: PathBuf },
}

impl Op {
    fn ino(&self) -> Option<u64> {
        match self {
            Op::Write { ino, .. } | Op::SetLen { ino, .. } => Some(*ino),
            Op::Create { .. } | Op::Remove { .. } => None,
        }
    }

    fn view(&self) -> PendingOp<'_> {
        match self {
            Op::Write { path, offset, data, .. } => {
                PendingOp::Write { path, offset: *offset, len: data.len() }
            }
            Op::SetLen { path, len, .. } => PendingOp::SetLen { path, len: *len },
            Op::Create { path, .. } => PendingOp::Create { path },
            Op::Remove { path } => PendingOp::Remove { path },
        }
    }
}

fn write_into(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    if let Some(dst) = image.get_mut(start..end) {
        dst.copy_from_slice(data);
    }
}

#[derive(Debug, Default, Clone)]
struct Inode {
    written: Vec<u8>,
    synced: Vec<u8>,
}

#[derive(Debug, Default)]
struct State {
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    /// Names as they are now.
    dir: BTreeMap<PathBuf, u64>,
    /// Names as a power loss would leave them, before the pending directory operations.
    dir_synced: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    /// Entries that are not regular files (see [`SimDisk::make_special`]); durable at once.
    specials: BTreeMap<PathBuf, EntryKind>,
    /// Files that cannot be opened (see [`SimDisk::forbid_open`]).
    forbidden: BTreeSet<PathBuf>,
    /// Names a listing leaves out (see [`SimDisk::hide_from_listing`]).
    unlisted: BTreeSet<String>,
    /// Every operation not yet synced, in the order issued.
    pending: Vec<Op>,
    /// Locks held, by path: which lock file at the path each holds (a new one when the file is
    /// replaced).
    locks: BTreeMap<PathBuf, u64>,
    lock_generation: u64,
    ops: u64,
    crash_at: Option<u64>,
    crashed: bool,
    fail_at: Option<u64>,
    fail_next: Vec<OpKind>,
    /// Operations failed until healed: of this kind, on a file whose name ends so.
    fail_named: Vec<(OpKind, String)>,
    /// Whether [`IoFile::sync_data`] waits (see [`SimDisk::hold_syncs`]).
    syncs_held: bool,
    /// How many syncs wait at the gate now.
    syncs_waiting: usize,
    /// Every counted operation and the file it named, when asked for.
    log: Option<Vec<(OpKind, PathBuf)>>,
}

/// Something to do right after a listing (see [`SimDisk::after_next_list`]).
type Hook = Box<dyn FnOnce() + Send>;

/// A simulated disk. Cloning gives another handle to the same disk.
#[derive(Clone, Default)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
    /// Wakes syncs held at the gate, and those waiting for them to be held.
    gate: Arc<Condvar>,
    /// Run once, by the caller of the next [`Io::list`], after the listing is taken.
    after_list: Arc<Mutex<Option<Hook>>>,
}

impl std::fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("SimDisk")
            .field("files", &state.dir.len())
            .field("unsynced_ops", &state.pending.len())
            .field("ops", &state.ops)
            .field("crashed", &state.crashed)
            .finish()
    }
}

fn power_lost() -> io::Error {
    io::Error::other("simulated power loss: the disk is gone")
}

impl SimDisk {
    /// An empty disk.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is changed only after every check, so a panic elsewhere leaves it whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many operations (creates, writes, syncs, length changes, removals, directory syncs) the
    /// disk has been asked to do so far, failed ones included.
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Loses power just before operation number `n` (counting from 0, as [`SimDisk::ops`] does):
    /// that operation and every later one fail, and the disk keeps its state for
    /// [`SimDisk::crash`].
    pub fn crash_at_op(&self, n: u64) {
        self.lock().crash_at = Some(n);
    }

    /// Fails operation number `n` (counting from 0) with an I/O error; it has no effect. Later
    /// operations work.
    pub fn fail_op(&self, n: u64) {
        self.lock().fail_at = Some(n);
    }

    /// Fails the next operation of this kind with an I/O error; it has no effect.
    pub fn fail_next(&self, kind: OpKind) {
        self.lock().fail_next.push(kind);
    }

    /// Fails every operation of this kind on a file whose name ends with `suffix` (`".idx"`:
    /// the sidecar indexes), as a full or failing disk would, until [`SimDisk::heal`]. The
    /// failure is `ENOSPC` (`StorageFull`); it has no effect.
    pub fn fail_named(&self, kind: OpKind, suffix: &str) {
        self.lock().fail_named.push((kind, suffix.to_owned()));
    }

    /// Ends the failures [`SimDisk::fail_named`] set.
    pub fn heal(&self) {
        self.lock().fail_named.clear();
    }

    /// Puts an entry at `path` that is not a regular file (a named pipe, a directory, a link to
    /// nothing, as `kind` says): it is listed and [`Io::entry_kind`] tells what it is; opening it
    /// fails. It survives crashes.
    pub fn make_special(&self, path: &Path, kind: EntryKind) {
        self.lock().specials.insert(path.to_path_buf(), kind);
    }

    /// Makes opening the file at `path` fail with `PermissionDenied` from now on, as a file the
    /// process may not read would. It survives crashes.
    pub fn forbid_open(&self, path: &Path) {
        self.lock().forbidden.insert(path.to_path_buf());
    }

    /// Makes every listing leave out the entries named `names` (replacing the names given
    /// before), as a directory listing taken while another process creates and removes entries
    /// can leave out one that was there all along; looking an entry up by name still finds it.
    pub fn hide_from_listing(&self, names: &[String]) {
        self.lock().unlisted = names.iter().cloned().collect();
    }

    /// Runs `then` right after the next [`Io::list`] takes its listing, before the listing is
    /// returned (on the lister's thread, the disk not locked): a test puts another writer's
    /// directory operations between a reader's listing and its opening of what it listed.
    pub fn after_next_list(&self, then: impl FnOnce() + Send + 'static) {
        *self.after_list.lock().unwrap_or_else(PoisonError::into_inner) = Some(Box::new(then));
    }

    /// Takes the hook set by [`SimDisk::after_next_list`].
    fn take_after_list(&self) -> Option<Hook> {
        self.after_list.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Removes the lock file at `path` under its holder, as `rm LOCK` would: the holder keeps a
    /// lock on a file no longer there ([`IoLock::is_current`] says so), and the next
    /// [`Io::try_lock`] of `path` locks a new file.
    pub fn replace_lock_file(&self, path: &Path) {
        self.lock().locks.remove(path);
    }

    /// Holds every [`IoFile::sync_data`] from now on until [`SimDisk::release_syncs`]: a test
    /// lines appenders up behind a sync that cannot finish, instead of hoping a slow one lasts.
    pub fn hold_syncs(&self) {
        self.lock().syncs_held = true;
    }

    /// Lets the held syncs go on (in no particular order), and every later one.
    pub fn release_syncs(&self) {
        self.lock().syncs_held = false;
        self.gate.notify_all();
    }

    /// How many syncs are held now (see [`SimDisk::hold_syncs`]).
    pub fn held_syncs(&self) -> usize {
        self.lock().syncs_waiting
    }

    /// Blocks until `n` syncs are held (see [`SimDisk::hold_syncs`]).
    pub fn wait_for_held_syncs(&self, n: usize) {
        let mut state = self.lock();
        while state.syncs_waiting < n {
            state = self.gate.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Starts recording every counted operation (its kind and the path it named), for tests that
    /// look for one operation in a run.
    pub fn record_ops(&self) {
        self.lock().log.get_or_insert_with(Vec::new);
    }

    /// The operations recorded since [`SimDisk::record_ops`], in order; index `i` is operation
    /// number `i` counted from when recording began.
    pub fn op_log(&self) -> Vec<(OpKind, PathBuf)> {
        self.lock().log.clone().unwrap_or_default()
    }

    /// Whether the power is out.
    pub fn is_crashed(&self) -> bool {
        self.lock().crashed
    }

    /// Counts an operation and applies the faults. `Err` means the operation must not happen.
    fn begin(state: &mut State, kind: OpKind, path: &Path) -> io::Result<()> {
        if state.crashed {
            return Err(power_lost());
        }
        if let Some(log) = state.log.as_mut() {
            log.push((kind, path.to_path_buf()));
        }
        let n = state.ops;
        state.ops += 1;
        if state.crash_at == Some(n) {
            state.crashed = true;
            return Err(power_lost());
        }
        if state.fail_at == Some(n) {
            state.fail_at = None;
            return Err(io::Error::other(format!(
                "simulated I/O failure of {kind:?} (operation {n})"
            )));
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if state.fail_named.iter().any(|(k, suffix)| *k == kind && name.ends_with(suffix.as_str()))
        {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!("simulated ENOSPC on {kind:?} of {name} (operation {n})"),
            ));
        }
        if let Some(i) = state.fail_next.iter().position(|k| *k == kind) {
            state.fail_next.remove(i);
            return Err(io::Error::other(format!(
                "simulated I/O failure of {kind:?} (operation {n})"
            )));
        }
        Ok(())
    }

    /// The disk as it would be found after a power loss now: everything synced, and each
    /// unsynced operation as `fate` decides, applied in the order issued. The new disk is
    /// independent of this one; this one stays as it was (a store still using it sees the
    /// power out from now on).
    pub fn crash(&self, fate: impl FnMut(PendingOp<'_>) -> Fate) -> SimDisk {
        self.crash_in_order(fate, |n| (0..n).collect())
    }

    /// As [`SimDisk::crash`], with the unsynced operations that survive landing in the order
    /// `order(n)` gives: a permutation of `0..n` over the `n` pending operations (indices out of
    /// range or repeated are ignored).
    pub fn crash_in_order(
        &self,
        mut fate: impl FnMut(PendingOp<'_>) -> Fate,
        order: impl FnOnce(usize) -> Vec<usize>,
    ) -> SimDisk {
        let mut state = self.lock();
        state.crashed = true;
        let fates: Vec<Fate> = state.pending.iter().map(|op| fate(op.view())).collect();
        let mut seen = BTreeSet::new();
        let order: Vec<usize> = order(state.pending.len())
            .into_iter()
            .filter(|&i| i < state.pending.len() && seen.insert(i))
            .collect();
        let mut images: HashMap<u64, Vec<u8>> =
            state.inodes.iter().map(|(ino, f)| (*ino, f.synced.clone())).collect();
        let mut dir = state.dir_synced.clone();
        for i in order {
            let (Some(op), Some(fate)) = (state.pending.get(i), fates.get(i)) else { continue };
            let keep = match *fate {
                Fate::Keep => usize::MAX,
                Fate::Drop => 0,
                Fate::Tear(n) => n,
            };
            if keep == 0 {
                continue;
            }
            match op {
                Op::Write { ino, offset, data, .. } => {
                    let image = images.entry(*ino).or_default();
                    write_into(
                        image,
                        *offset,
                        data.get(..keep.min(data.len())).unwrap_or_default(),
                    );
                }
                Op::SetLen { ino, len, .. } => {
                    images.entry(*ino).or_default().resize(*len as usize, 0)
                }
                Op::Create { ino, path } => {
                    dir.insert(path.clone(), *ino);
                }
                Op::Remove { path } => {
                    dir.remove(path);
                }
            }
        }
        let mut next = State {
            next_ino: state.next_ino,
            dirs: state.dirs.clone(),
            specials: state.specials.clone(),
            forbidden: state.forbidden.clone(),
            ..State::default()
        };
        for (path, ino) in &dir {
            let image = images.get(ino).cloned().unwrap_or_default();
            next.inodes.insert(*ino, Inode { written: image.clone(), synced: image });
            next.dir.insert(path.clone(), *ino);
        }
        next.dir_synced = next.dir.clone();
        SimDisk {
            state: Arc::new(Mutex::new(next)),
            gate: Arc::default(),
            after_list: Arc::default(),
        }
    }

    /// A power loss in which every unsynced operation happened to land.
    pub fn crash_keep_written(&self) -> SimDisk {
        self.crash(|_| Fate::Keep)
    }

    /// A crash of the process, not of the machine: the operating system keeps everything
    /// written, but what was not synced is still not synced (a later power loss can lose it).
    /// Locks held by the process are released. This disk stays as it was, with the power out, for
    /// the dead process's handles.
    pub fn process_crash(&self) -> SimDisk {
        let mut state = self.lock();
        state.crashed = true;
        let next = State {
            inodes: state.inodes.clone(),
            next_ino: state.next_ino,
            dir: state.dir.clone(),
            dir_synced: state.dir_synced.clone(),
            dirs: state.dirs.clone(),
            specials: state.specials.clone(),
            forbidden: state.forbidden.clone(),
            pending: state.pending.clone(),
            ..State::default()
        };
        SimDisk {
            state: Arc::new(Mutex::new(next)),
            gate: Arc::default(),
            after_list: Arc::default(),
        }
    }

    /// A power loss in which nothing unsynced survives.
    pub fn crash_lose_unsynced(&self) -> SimDisk {
        self.crash(|_| Fate::Drop)
    }

    /// The written bytes of the file at `path`, if it exists.
    pub fn read_file(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.lock();
        let ino = state.dir.get(path)?;
        state.inodes.get(ino).map(|f| f.written.clone())
    }

    /// Damages the disk: XORs the byte at `offset` of the file at `path` with `mask`, in both
    /// images (as a bad sector would). Returns whether the byte exists.
    pub fn flip_byte(&self, path: &Path, offset: u64, mask: u8) -> bool {
        let mut state = self.lock();
        let Some(ino) = state.dir.get(path).copied() else { return false };
        let Some(f) = state.inodes.get_mut(&ino) else { return false };
        let mut hit = false;
        for image in [&mut f.written, &mut f.synced] {
            if let Some(b) = image.get_mut(offset as usize) {
                *b ^= mask;
                hit = true;
            }
        }
        hit
    }

    /// The files in `dir` with their written lengths, sorted by name.
    pub fn files(&self, dir: &Path) -> Vec<(PathBuf, u64)> {
        let state = self.lock();
        state
            .dir
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, ino)| {
                (p.clone(), state.inodes.get(ino).map_or(0, |f| f.written.len() as u64))
            })
            .collect()
    }
}
