//! Keeping bytes aside before opening cuts them: a copy, synced, in a file beside the segment,
//! so an operator can look at what a torn tail (or a file that was not a segment) held.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::file::commit::segment::IoFailure;
use crate::file::format::layout::SegmentId;
use crate::file::format::names;
use crate::file::io::{Io, IoFile};

/// The most names tried for one copy.
const NAMES: u32 = 1000;

/// How much is copied at a time.
const CHUNK: u64 = 1 << 20;

/// Copies bytes `bytes` of segment `id` (`file`) to a new file in `dir`, and syncs it; the
/// caller syncs the directory before cutting them. Returns the copy's path.
pub(crate) fn set_aside(
    io: &dyn Io,
    dir: &Path,
    id: SegmentId,
    file: &dyn IoFile,
    bytes: Range<u64>,
) -> Result<PathBuf, IoFailure> {
    let mut made = None;
    for n in 1..=NAMES {
        let path = dir.join(names::aside(id, bytes.start, n));
        match io.create_new(&path) {
            Ok(copy) => {
                made = Some((path, copy));
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(IoFailure::new(format!("creating {}", path.display()), e)),
        }
    }
    let Some((path, copy)) = made else {
        let e = io::Error::new(io::ErrorKind::AlreadyExists, "every name is taken");
        let what = format!("keeping bytes of segment {} aside in {}", id, dir.display());
        return Err(IoFailure::new(what, e));
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
    Ok(path)
}
