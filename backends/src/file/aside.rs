//! Keeping bytes aside before opening cuts them: a copy, synced, in a file beside the segment,
//! so an operator can look at what a torn tail (or a file that was not a segment) held.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::io::{Io, IoFile};
use super::layout::SegmentId;
use super::segment::IoFailure;

/// The most names tried for one copy.
const NAMES: u32 = 1000;

/// How much is copied at a time.
const CHUNK: u64 = 1 << 20;

/// The name of the copy of segment `id`'s bytes from `from`: `{segment}.{from}.torn`, or
/// `{segment}.{from}-{n}.torn` when an earlier copy took that name. Never a segment's name.
pub(crate) fn aside_name(id: SegmentId, from: u64, n: u32) -> String {
    match n {
        0 | 1 => format!("{}.{from}.torn", id.file_name()),
        n => format!("{}.{from}-{n}.torn", id.file_name()),
    }
}

/// Whether `name` is one made by [`aside_name`]: a segment's name, the offset the copy starts
/// at, perhaps `-n`, and `.torn`.
pub(crate) fn is_aside_name(name: &str) -> bool {
    let Some(rest) = name.strip_suffix(".torn") else { return false };
    let Some((segment, from)) = rest.rsplit_once('.') else { return false };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let from_ok = match from.split_once('-') {
        Some((at, n)) => digits(at) && digits(n),
        None => digits(from),
    };
    from_ok && SegmentId::from_file_name(segment).is_some()
}

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
        let path = dir.join(aside_name(id, bytes.start, n));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_never_named_like_a_segment() {
        for n in [1, 2, 17] {
            let name = aside_name(SegmentId(7), 4096, n);
            assert_eq!(SegmentId::from_file_name(&name), None, "{name}");
            assert!(name.starts_with("00000000000000000007.seg.4096") && name.ends_with(".torn"));
            assert!(is_aside_name(&name), "{name}");
        }
    }
}
