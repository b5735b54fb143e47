//! The file backend, the embedded default: one shared, segmented, append-only log for every
//! session in a directory.
//!
//! - **Segments** (`{id:020}.seg`): a header naming the format version and the checksum
//!   polynomial, then groups of the codec's batch frames (`layout` and `docs/format.md` draw the
//!   bytes). The active segment is sealed at [`FileOptions::segment_size`] and a new one begun.
//! - **Index**: rebuilt on open by one pass: a sealed segment is read from its sidecar index
//!   (`sidecar`, written by the reclaim thread after the seal) when it has a sound one, every
//!   other segment (the newest always) scanned; per session one entry per batch (first
//!   seq, count, segment, offset, length), not one per event, and the session's head (its last
//!   run, kept by `RunHead::advance` as batches land), so `heads()` folds nothing.
//! - **Group commit**: concurrent appenders are written with one write and one `fdatasync`; the
//!   compare-and-set is checked against the tail including batches not yet written, so racing
//!   appends to one session have one winner. Each request carries the completer of the future
//!   its caller awaits or waits on: a sync caller that finds no leader writes its own group, the
//!   committer thread the store owns writes the rest (waiting briefly for the appenders of the
//!   last group to come back) and wakes their callers itself, and no thread is parked per
//!   waiting append.
//! - **Durability**: `Synced` acknowledges after `fdatasync` returned; `Buffered` after the write
//!   reached the operating system. A failed write or sync poisons the store until reopened.
//! - **One writer**: an exclusive lock on `LOCK` in the directory; a second writer gets
//!   [`OpenError::Locked`](crate::OpenError::Locked). A writer whose lock file was removed or
//!   replaced stops writing (poisoned) rather than interleave with another.
//!   [`FileOptions::read_only`] takes no lock and reads what was valid when it opened (a
//!   consistent set of segments, listed again while a live writer removes them), so a journal
//!   can be inspected while it is written; [`FileStore::writer_is_live`] says whether it is
//!   ([`writer_is_live`], with no store open).
//! - **Open files**: the active segment and at most [`FileOptions::max_open_segments`] others,
//!   so a journal of any number of segments opens under a small limit on open files.
//! - **Crashes**: on open, damage at the tail (a torn last group) is cut and the cut synced before
//!   any append, its bytes kept aside first and what it held reported
//!   ([`FileStore::torn_tail`]); damage inside acknowledged data refuses to open (or, inside a
//!   sealed segment read from its sidecar, the read that reaches it), naming segment
//!   and byte offset, unless [`OnCorruption::TruncateAtCorruption`] was chosen; a file named like
//!   a segment that is not one (not a regular file, or a header this journal never wrote) is
//!   refused by name and left alone.
//! - **Space**: deleting a session appends a deletion frame; the reclaim thread the store owns
//!   removes segments left with no live batch (a deletion frame stays while older frames of its
//!   session remain on disk) and compacts sealed segments dead enough
//!   ([`FileOptions::compact_when_dead`], half by default), in small throttled chunks beside the
//!   appends, never inside a group; [`FileStore::wait_reclaimed`] waits for it.
//!
//! Every byte goes through the `io::Io` trait: the operating system, or (feature `testing`) the
//! simulated disk `io::sim::SimDisk` that crash tests use (also re-exported as `sim`).
//!
//! [`verify_dir`] checks a journal directory without opening it for writing, reporting every
//! problem with its segment file and byte offset; `stepjournal verify` is built on it, and so is
//! [`ReadAround`], which reads every session no problem names of a damaged journal, writing
//! nothing (`--on-corruption skip` and `stepjournal salvage`).
//!
//! ## Rooms
//!
//! The backend's modules sit in rooms by job. Each room, and each module at this level, uses
//! only those listed before it; no two modules import each other (a module uses its parent's
//! items at most), and none uses `store`, the public face. Each room's own docs give the order
//! inside it.
//!
//! 1. `io/`: the I/O seam every byte goes through (`Io`, `IoFile`), the operating system
//!    (`real`), and the simulated disk (`sim`, feature `testing` and the unit tests only).
//! 2. `format/`: the on-disk format and what its bytes mean: `layout` (segment and group
//!    headers), `names` (the directory's entries: `LOCK`, segments, sidecar indexes, torn
//!    copies), `heads` (what a batch's records tell of its session's head), `walk/` (the one
//!    walk over a segment's groups and frames, and what damage means, shared by opening,
//!    sidecars and verify), `torn` (what a torn tail held).
//! 3. `options`: [`FileOptions`], how a journal is opened (at this level: opening, the append
//!    path and reclaiming space all read it).
//! 4. `index/`: where each session's batches are (`BatchLoc`), which segments still matter, and
//!    `builder`, rebuilding it from a scan (ordering, latest copy wins, continuity). The builder
//!    is here rather than with opening because three rooms feed it: opening, the sidecar
//!    indexes and verify.
//! 5. `files`: the bounded cache of open segment files; `read`: reading batches back by their
//!    index entries; `race`: how often a read without the lock starts again beside a live
//!    writer. At this level because the append path, opening, the store and verify share them.
//! 6. `commit/`: the append path: the queue, the cohort, creating segments,
//!    the state callers share (`Core`, which holds the queue), writing a group, the group commit.
//! 7. `space/`: the reclaim thread: sidecar indexes, removing and compacting segments.
//! 8. `open/`: opening a directory into a `Core`: the writer lock, then a scan that gathers
//!    facts, a pure decision on them, and the repairs carried out.
//! 9. `store`: [`FileStore`], the [`JournalStore`](crate::JournalStore) over a `Core`.
//! 10. `verify/`: the read-only check of a directory ([`verify_dir`]), on the walk, the builder
//!     and `read`, and its skip mode, [`ReadAround`]: a damaged journal read around its damage.
//!     Last, since it writes nothing and nothing uses it.

mod commit;
mod files;
mod format;
mod index;
#[cfg(feature = "testing")]
pub mod io;
#[cfg(not(feature = "testing"))]
mod io;
mod listing;
mod open;
mod options;
mod race;
mod read;
mod read_session;
mod space;
mod store;
mod verify;

#[cfg(test)]
mod async_read_tests;
#[cfg(test)]
mod poison_tests;

/// The simulated disk, at the path crash tests and tools have always named it (it lives in
/// `io`). Feature `testing`.
#[cfg(feature = "testing")]
pub use self::io::sim;
/// The byte layout of segment files. Feature `testing`.
#[cfg(feature = "testing")]
pub use format::layout;
pub use format::layout::{LOCK_FILE, SegmentId};
pub use format::names::is_journal_entry;
pub use format::torn::{TornFrame, TornTail};
pub use open::lock::writer_is_live;
pub use options::{FileOptions, MIN_SEGMENT_SIZE, OnCorruption, TORN_COPIES_KEPT};
pub use store::{FileStats, FileStore, IndexSize};
#[cfg(feature = "testing")]
pub use verify::verify_dir_with;
pub use verify::{
    DamagedSession, FileFinding, FileProblem, LocatedRecord, ReadAround, VerifyReport, verify_dir,
};
