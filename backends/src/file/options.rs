//! [`FileOptions`]: how a file journal is opened.

use stepjournal_codec::Limits;

use crate::OpenError;

use super::format::layout::SEGMENT_HEADER_LEN;

/// What opening does when it finds damage inside acknowledged data (damage followed by data
/// that was durable after it, or damage in a sealed segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnCorruption {
    /// Refuse to open, naming the segment file and byte offset. The default.
    #[default]
    Refuse,
    /// Salvage: keep everything before the damaged group, cut the segment there and remove every
    /// later segment. Acknowledged events after the damage are lost. A read-only store only stops
    /// reading there.
    TruncateAtCorruption,
}

/// Options for [`FileStore::open`](super::FileStore::open), with documented defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileOptions {
    pub(crate) segment_size: u64,
    pub(crate) max_group_bytes: u64,
    pub(crate) max_queued_bytes: u64,
    pub(crate) preallocate: u64,
    pub(crate) on_corruption: OnCorruption,
    pub(crate) read_only: bool,
    pub(crate) limits: Limits,
    pub(crate) max_open_segments: usize,
    pub(crate) compact_when_dead: u8,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            segment_size: 64 << 20,
            max_group_bytes: 4 << 20,
            max_queued_bytes: 16 << 20,
            preallocate: 1 << 20,
            on_corruption: OnCorruption::Refuse,
            read_only: false,
            limits: Limits::default(),
            max_open_segments: 32,
            compact_when_dead: 25,
        }
    }
}

/// How many copies of the bytes cut at one place (one segment, one offset) a writable open
/// keeps aside: 16. Making a new one removes the oldest beyond it (the copy numbered lowest),
/// and the open reports what it removed ([`TornTail::copies_removed`](super::TornTail)), so a
/// journal cut at the same place again and again neither fills its directory nor runs out of
/// names.
pub const TORN_COPIES_KEPT: usize = 16;

/// The smallest segment size accepted.
pub const MIN_SEGMENT_SIZE: u64 = 4096;

impl FileOptions {
    /// The defaults: 64 MiB segments, groups of up to 4 MiB, 1 MiB of zeros ahead of the data,
    /// [`OnCorruption::Refuse`], read and write, [`Limits::default`], 32 sealed segments kept
    /// open, sealed segments compacted once half dead.
    pub fn new() -> Self {
        Self::default()
    }

    /// The size at which the active segment is sealed and a new one started (default 64 MiB,
    /// at least [`MIN_SEGMENT_SIZE`]). A segment grows past it by at most one group.
    pub fn segment_size(mut self, bytes: u64) -> Self {
        self.segment_size = bytes;
        self
    }

    /// How many bytes of batches one group commit writes at most (default 4 MiB); a single batch
    /// larger than this is written alone.
    pub fn max_group_bytes(mut self, bytes: u64) -> Self {
        self.max_group_bytes = bytes;
        self
    }

    /// How many bytes of encoded batches may wait in the committer's queue besides the group
    /// being written (default 16 MiB: four groups of the default size). An appender that finds
    /// the queue full waits in line, in arrival order, before its batch is checked against the
    /// session's tail, so a burst of appenders waits instead of growing the store's memory (and
    /// every caller's wait) without limit; a batch larger than this goes alone into an empty
    /// queue. An async append whose future is dropped while it waits leaves nothing; one
    /// dropped after it entered the queue may still land, as any append may. `FileStats`
    /// counts the appends that waited and the most bytes the queue held.
    pub fn max_queued_bytes(mut self, bytes: u64) -> Self {
        self.max_queued_bytes = bytes;
        self
    }

    /// How far ahead of the data the active segment is extended with zeros, written and synced
    /// once (default 1 MiB; 0 turns it off). Appends then overwrite blocks that already exist,
    /// so their `fdatasync` changes no file metadata, which is markedly faster on most file
    /// systems. The zeros are cut off when the segment is sealed, and on open.
    pub fn preallocate(mut self, bytes: u64) -> Self {
        self.preallocate = bytes;
        self
    }

    /// What to do on damage inside acknowledged data (default [`OnCorruption::Refuse`]).
    pub fn on_corruption(mut self, mode: OnCorruption) -> Self {
        self.on_corruption = mode;
        self
    }

    /// Open without the writer lock and never write (default `false`): for inspecting a journal
    /// another process is writing. Appends and deletes return
    /// [`StoreError::ReadOnly`](crate::StoreError::ReadOnly).
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// How many segment files other than the active one are kept open for reads (default 32, at
    /// least 1): the least recently read is closed past it, so a journal of any number of
    /// segments opens under a small limit on open files. Opening one that finds the process at
    /// its limit closes half of those open and keeps the bound lower from then on.
    pub fn max_open_segments(mut self, files: usize) -> Self {
        self.max_open_segments = files;
        self
    }

    /// How dead a sealed segment is, in percent of [`segment_size`](Self::segment_size), when
    /// the store's reclaim thread compacts it (default 25, from 1 to 100): its live batches are
    /// copied to the active segment, in small throttled chunks beside the appends, then the
    /// segment is removed. A segment's dead bytes are all of its bytes that hold no live batch
    /// (headers, deletion frames, batches deleted or copied since). 100 compacts nothing (a
    /// segment is removed once nothing in it is needed); lower values free space sooner for
    /// more copying: at 25 a compaction copies at most three bytes for each byte it frees, and
    /// deleting a random half of sessions that interleave in segments frees about half the
    /// journal, where 50 freed a third (docs/perf.md). Whatever the value, a segment is
    /// compacted only when that frees more bytes than the copy writes (a group header per chunk
    /// copied, a segment header should a chunk start a segment), so with no appends every
    /// compaction makes the journal smaller and compaction ends.
    pub fn compact_when_dead(mut self, percent: u8) -> Self {
        self.compact_when_dead = percent;
        self
    }

    /// The fewest dead bytes a sealed segment holds to be compacted (`None`: compaction is off).
    pub(crate) fn compact_dead_at_least(&self) -> Option<u64> {
        (self.compact_when_dead < 100)
            .then(|| self.segment_size / 100 * u64::from(self.compact_when_dead))
    }

    /// Size limits for records and batches (default [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), OpenError> {
        let bad = |reason: String| Err(OpenError::Options { reason });
        if self.segment_size < MIN_SEGMENT_SIZE {
            return bad(format!(
                "segment_size {} is below the minimum of {MIN_SEGMENT_SIZE} bytes",
                self.segment_size
            ));
        }
        if self.max_group_bytes == 0 || self.max_group_bytes > u64::from(u32::MAX / 2) {
            return bad(format!(
                "max_group_bytes {} must be between 1 and {}",
                self.max_group_bytes,
                u32::MAX / 2
            ));
        }
        if self.max_queued_bytes == 0 {
            return bad("max_queued_bytes must be at least 1".to_owned());
        }
        if !(1..=100).contains(&self.compact_when_dead) {
            return bad(format!(
                "compact_when_dead {} must be a percentage from 1 to 100",
                self.compact_when_dead
            ));
        }
        if self.max_open_segments == 0 {
            return bad("max_open_segments must be at least 1".to_owned());
        }
        if self.limits.max_record == 0 || self.limits.max_batch < self.limits.max_record {
            return bad(format!(
                "limits: max_batch ({}) must be at least max_record ({}), which must not be 0",
                self.limits.max_batch, self.limits.max_record
            ));
        }
        if u64::from(self.limits.max_batch) > u64::from(u32::MAX) - SEGMENT_HEADER_LEN as u64 {
            return bad("limits: max_batch is too large".to_owned());
        }
        Ok(())
    }
}
