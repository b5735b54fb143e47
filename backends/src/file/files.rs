//! The open segment files: a bounded cache, so a journal of more segments than the process may
//! open files can be opened and read. The active segment stays open (pinned); the others are
//! opened when read and closed, least recently used first, past the bound.
//!
//! A file is closed only when no one holds it: a reader that took a file from the cache reads it
//! to the end of its read even if the cache closes its own handle meanwhile (or the writer
//! removes the segment: an unlinked file stays readable through an open handle).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::format::layout::SegmentId;
use super::io::{Io, IoFile};

/// `EMFILE` and `ENFILE` (Linux, and the BSDs for `EMFILE`): the process, or the system, has as
/// many files open as it may.
const TOO_MANY_FILES: [i32; 2] = [24, 23];

/// Whether an open failed because too many files are open.
fn too_many_files(e: &io::Error) -> bool {
    e.raw_os_error().is_some_and(|code| TOO_MANY_FILES.contains(&code))
}

#[derive(Debug)]
struct Entry {
    file: Arc<dyn IoFile>,
    /// When it was last handed out (a counter, not a clock).
    used: u64,
    /// The active segment: never closed by the cache.
    pinned: bool,
}

#[derive(Debug, Default)]
struct Cache {
    entries: HashMap<SegmentId, Entry>,
    tick: u64,
    /// The most unpinned files kept open; lowered when opening one finds too many files open.
    // Invariant: at least 1.
    cap: usize,
}

impl Cache {
    fn unpinned(&self) -> usize {
        self.entries.values().filter(|e| !e.pinned).count()
    }

    /// Closes the least recently used unpinned file; returns whether there was one.
    fn evict_one(&mut self) -> bool {
        let oldest = self
            .entries
            .iter()
            .filter(|(_, e)| !e.pinned)
            .min_by_key(|(_, e)| e.used)
            .map(|(id, _)| *id);
        oldest.is_some_and(|id| self.entries.remove(&id).is_some())
    }

    fn insert(&mut self, id: SegmentId, file: Arc<dyn IoFile>, pinned: bool) -> Arc<dyn IoFile> {
        self.tick += 1;
        let used = self.tick;
        let kept = Arc::clone(&file);
        self.entries.insert(id, Entry { file, used, pinned });
        debug_assert!(
            self.entries.values().filter(|e| e.pinned).count() <= 1,
            "only the active segment is pinned"
        );
        while self.unpinned() > self.cap && self.evict_one() {}
        kept
    }
}

/// The open files of a journal's segments.
#[derive(Debug)]
pub(crate) struct SegmentFiles {
    io: Arc<dyn Io>,
    dir: PathBuf,
    read_only: bool,
    cache: Mutex<Cache>,
}

impl SegmentFiles {
    /// A cache of at most `cap` open files besides the pinned one (at least 1).
    pub(crate) fn new(io: Arc<dyn Io>, dir: &Path, read_only: bool, cap: usize) -> SegmentFiles {
        let cache = Cache { cap: cap.max(1), ..Cache::default() };
        SegmentFiles { io, dir: dir.to_path_buf(), read_only, cache: Mutex::new(cache) }
    }

    fn lock(&self) -> MutexGuard<'_, Cache> {
        // Every change under this lock is a whole insert or removal: a panic cannot tear it.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The file of segment `id`, opened if it is not open. `NotFound` when the segment is gone
    /// (removed since the caller learnt of it).
    pub(crate) fn get(&self, id: SegmentId) -> io::Result<Arc<dyn IoFile>> {
        {
            let mut cache = self.lock();
            cache.tick += 1;
            let tick = cache.tick;
            if let Some(e) = cache.entries.get_mut(&id) {
                e.used = tick;
                return Ok(Arc::clone(&e.file));
            }
        }
        let path = self.dir.join(id.file_name());
        let file = match self.io.open(&path, self.read_only) {
            Ok(file) => file,
            Err(e) if too_many_files(&e) => {
                // Close half of what is open, learn the lower bound, and try once more.
                {
                    let mut cache = self.lock();
                    let open = cache.unpinned();
                    cache.cap = (open / 2).max(1);
                    while cache.unpinned() > cache.cap && cache.evict_one() {}
                }
                self.io.open(&path, self.read_only)?
            }
            Err(e) => return Err(e),
        };
        Ok(self.lock().insert(id, file, false))
    }

    /// Keeps `file` as segment `id`'s, and pins it when it is the active segment (unpinning the
    /// one pinned before).
    pub(crate) fn put(&self, id: SegmentId, file: Arc<dyn IoFile>, active: bool) {
        let mut cache = self.lock();
        if active {
            cache.entries.values_mut().for_each(|e| e.pinned = false);
        }
        cache.insert(id, file, active);
    }

    /// Takes the files `other` holds open in place of this cache's (a read-only store that read
    /// the directory again).
    pub(crate) fn adopt(&self, other: SegmentFiles) {
        let entries = std::mem::take(&mut other.lock().entries);
        let mut cache = self.lock();
        cache.entries = entries;
        while cache.unpinned() > cache.cap && cache.evict_one() {}
    }

    /// Forgets segment `id` (it was removed).
    pub(crate) fn forget(&self, id: SegmentId) {
        self.lock().entries.remove(&id);
    }

    /// How many files the cache holds open.
    #[cfg(test)]
    fn open_count(&self) -> usize {
        self.lock().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::io::sim::SimDisk;

    fn disk_with(segments: u64) -> (Arc<dyn Io>, PathBuf) {
        let disk = SimDisk::new();
        let dir = PathBuf::from("/d");
        disk.create_dir_all(&dir).unwrap();
        for id in 1..=segments {
            disk.create_new(&dir.join(SegmentId(id).file_name())).unwrap();
        }
        (Arc::new(disk), dir)
    }

    #[test]
    fn the_cache_keeps_at_most_its_bound_open_besides_the_pinned_file() {
        let (io, dir) = disk_with(10);
        let files = SegmentFiles::new(Arc::clone(&io), &dir, true, 3);
        let active = io.open(&dir.join(SegmentId(10).file_name()), false).unwrap();
        files.put(SegmentId(10), active, true);
        for id in 1..=9 {
            files.get(SegmentId(id)).unwrap();
            assert!(files.open_count() <= 4, "{} open", files.open_count());
        }
        // The least recently used went first; the pinned one stays.
        files.get(SegmentId(7)).unwrap();
        files.get(SegmentId(1)).unwrap();
        let cache = files.lock();
        let mut open: Vec<u64> = cache.entries.keys().map(|id| id.0).collect();
        open.sort_unstable();
        assert_eq!(open, vec![1, 7, 9, 10]);
    }

    #[test]
    fn a_removed_segment_is_not_found_once_forgotten() {
        let (io, dir) = disk_with(2);
        let files = SegmentFiles::new(Arc::clone(&io), &dir, true, 4);
        files.get(SegmentId(1)).unwrap();
        io.remove(&dir.join(SegmentId(1).file_name())).unwrap();
        files.get(SegmentId(1)).unwrap();
        files.forget(SegmentId(1));
        let e = files.get(SegmentId(1)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
