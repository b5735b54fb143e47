//! The names of a journal's directory entries: its `LOCK` and its segments (`layout` names
//! both), each sealed segment's sidecar index, and the copies of torn tails kept aside before a
//! cut; and which entries of a directory are the journal's.

use super::layout::{LOCK_FILE, SegmentId};

/// The sidecar index's file name for segment `id`: `{id:020}.idx`.
pub(crate) fn sidecar(id: SegmentId) -> String {
    format!("{:020}.idx", id.0)
}

/// The segment id a sidecar index's file name carries, if the name is one.
pub(crate) fn sidecar_id(name: &str) -> Option<SegmentId> {
    let digits = name.strip_suffix(".idx")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(SegmentId)
}

/// The name of copy number `n` of segment `id`'s bytes from `from`: `{segment}.{from}.torn`
/// for the first, `{segment}.{from}-{n}.torn` for later ones (a higher number, a later copy).
/// Never a segment's name.
pub(crate) fn aside(id: SegmentId, from: u64, n: u64) -> String {
    match n {
        0 | 1 => format!("{}.{from}.torn", id.file_name()),
        n => format!("{}.{from}-{n}.torn", id.file_name()),
    }
}

/// The number of the copy `name` is, when [`aside`] made it for segment `id`'s bytes from
/// `from` (1 for the unnumbered first).
pub(crate) fn aside_number(name: &str, id: SegmentId, from: u64) -> Option<u64> {
    let rest = name.strip_prefix(id.file_name().as_str())?.strip_prefix('.')?;
    let rest = rest.strip_suffix(".torn")?.strip_prefix(from.to_string().as_str())?;
    if rest.is_empty() {
        return Some(1);
    }
    let n = rest.strip_prefix('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// Whether `name` is one made by [`aside`]: a segment's name, the offset the copy starts at,
/// perhaps `-n`, and `.torn`.
pub(crate) fn is_aside(name: &str) -> bool {
    let Some(rest) = name.strip_suffix(".torn") else { return false };
    let Some((segment, from)) = rest.rsplit_once('.') else { return false };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let from_ok = match from.split_once('-') {
        Some((at, n)) => digits(at) && digits(n),
        None => digits(from),
    };
    from_ok && SegmentId::from_file_name(segment).is_some()
}

/// Whether `name` is an entry a file journal writes in its directory: its `LOCK`, a segment, a
/// sealed segment's sidecar index, or the copy of a torn tail kept aside before a cut.
pub fn is_journal_entry(name: &str) -> bool {
    name == LOCK_FILE
        || SegmentId::from_file_name(name).is_some()
        || sidecar_id(name).is_some()
        || is_aside(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecar_names_are_told_from_segment_names() {
        assert_eq!(sidecar_id(&sidecar(SegmentId(42))), Some(SegmentId(42)));
        assert_eq!(sidecar_id(&SegmentId(42).file_name()), None);
        assert_eq!(sidecar_id("42.idx"), None);
    }

    #[test]
    fn a_copy_is_never_named_like_a_segment() {
        for n in [1, 2, 17] {
            let name = aside(SegmentId(7), 4096, n);
            assert_eq!(SegmentId::from_file_name(&name), None, "{name}");
            assert!(name.starts_with("00000000000000000007.seg.4096") && name.ends_with(".torn"));
            assert!(is_aside(&name), "{name}");
            assert_eq!(aside_number(&name, SegmentId(7), 4096), Some(n));
            assert_eq!(aside_number(&name, SegmentId(7), 409), None);
            assert_eq!(aside_number(&name, SegmentId(8), 4096), None);
        }
    }
}
