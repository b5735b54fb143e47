//! Keeping bytes aside before opening cuts them: a copy, synced, in a file beside the segment,
//! so an operator can look at what a torn tail (or a file that was not a segment) held. At most
//! [`TORN_COPIES_KEPT`] copies of one place are kept: the oldest beyond it are removed.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::file::commit::segment::IoFailure;
use crate::file::format::layout::SegmentId;
use crate::file::format::names;
use crate::file::io::{Io, IoFile};
use crate::file::options::TORN_COPIES_KEPT;

/// How much is copied at a time.
const CHUNK: u64 = 1 << 20;

/// A copy kept aside.
#[derive(Debug)]
pub(crate) struct Aside {
    /// The new copy.
    pub path: PathBuf,
    /// The older copies of the same place removed to keep [`TORN_COPIES_KEPT`], oldest first.
    pub removed: Vec<PathBuf>,
}

/// Copies bytes `bytes` of segment `id` (`file`) to a new file in `dir`, numbered after every
/// copy of the same place already there, and syncs it; then removes the oldest copies of that
/// place beyond [`TORN_COPIES_KEPT`]. The caller syncs the directory before cutting them.
pub(crate) fn set_aside(
    io: &dyn Io,
    dir: &Path,
    id: SegmentId,
    file: &dyn IoFile,
    bytes: Range<u64>,
) -> Result<Aside, IoFailure> {
    let listed = io.list(dir).map_err(|e| {
        IoFailure::new(format!("listing {} to keep bytes of segment {id} aside", dir.display()), e)
    })?;
    let mut older: Vec<(u64, String)> = listed
        .into_iter()
        .filter_map(|name| names::aside_number(&name, id, bytes.start).map(|n| (n, name)))
        .collect();
    older.sort_unstable();
    let mut n = older.last().map_or(1, |(last, _)| last.saturating_add(1));
    let (path, copy) = loop {
        let path = dir.join(names::aside(id, bytes.start, n));
        match io.create_new(&path) {
            Ok(copy) => break (path, copy),
            // A copy made since the listing (none should be: the lock is held).
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < u64::MAX => n += 1,
            Err(e) => return Err(IoFailure::new(format!("creating {}", path.display()), e)),
        }
    };
    let mut buf = Vec::new();
    let mut at = bytes.start;
    while at < bytes.end {
        let n = (bytes.end - at).min(CHUNK);
        buf.resize(n as usize, 0);
        file.read_exact_at(&mut buf, at).map_err(|e| {
            IoFailure::new(format!("reading {n} bytes at byte {at} of segment {id}"), e)
        })?;
        copy.write_all_at(&buf, at - bytes.start)
            .map_err(|e| IoFailure::new(format!("writing {}", path.display()), e))?;
        at += n;
    }
    copy.sync_data().map_err(|e| IoFailure::new(format!("fdatasync of {}", path.display()), e))?;
    // The new copy is one of those kept.
    let excess = (older.len() + 1).saturating_sub(TORN_COPIES_KEPT);
    let mut removed = Vec::with_capacity(excess);
    for (_, name) in older.into_iter().take(excess) {
        let old = dir.join(name);
        match io.remove(&old) {
            Ok(()) => removed.push(old),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(IoFailure::new(format!("removing the old copy {}", old.display()), e));
            }
        }
    }
    Ok(Aside { path, removed })
}
