//! The segments of a journal directory a live writer keeps changing, found whole: for verify
//! and for a read-only open, which take no lock.
//!
//! A directory listing (`getdents`) taken while another process creates and removes entries
//! may leave out an entry that was there all along: beside a writer that rotates 4 KiB segments
//! and compacts them, about one listing in a few hundred left out a segment that existed before
//! the listing began and after it ended (ext4). A check built on such a listing reads a journal
//! with a segment missing and reports the batches in it as a gap. Segment ids are given out one
//! after another and never again, so every id a listing leaves out below its newest is looked
//! up by name (a lookup by name does not race), and the ids after the newest are looked up until
//! several in a row are absent: what this returns is every segment that existed through the
//! listing and its lookups. Whether anything is newer than a segment is asked twice by verify
//! before it reads that segment as the newest (two listings leaving out the newest one).

use std::collections::BTreeSet;
use std::path::Path;

use super::format::layout::SegmentId;
use super::io::Io;
use crate::StoreError;

/// The most ids one listing looks up by name. Beyond it (ids spread over an enormous range, as
/// a stray file named with a huge id would make them), the ids not looked up are taken from a
/// second listing and said in the check's notes.
const LOOKUPS: u64 = 1 << 20;

/// How many absent ids in a row after the newest listed are looked past.
const PAST_ABSENT: u32 = 16;

/// The segments after `after` (all of them for `None`), in id order.
pub(crate) struct Segments {
    pub ids: Vec<SegmentId>,
    /// What could not be looked up by name, in words (see [`LOOKUPS`]).
    pub note: Option<String>,
}

/// Lists the segments of `dir` after `after`, completed as [`complete`] does.
pub(crate) fn segments(
    io: &dyn Io,
    dir: &Path,
    after: Option<SegmentId>,
) -> Result<Segments, StoreError> {
    let ids = listed(io, dir, after)?;
    complete(io, dir, ids, after)
}

/// Completes `ids`, the segments one listing of `dir` named after `after`: each id it left out
/// below its newest looked up by name, and the ids after its newest looked up until
/// [`PAST_ABSENT`] in a row are absent. An id whose lookup fails is taken as absent (a
/// directory that cannot be searched would otherwise yield every id looked up).
pub(crate) fn complete(
    io: &dyn Io,
    dir: &Path,
    mut ids: BTreeSet<SegmentId>,
    after: Option<SegmentId>,
) -> Result<Segments, StoreError> {
    let lo = after.map_or(1, |a| a.0.saturating_add(1));
    let hi = ids.last().map_or(lo.saturating_sub(1), |id| id.0);
    let missing = hi.saturating_add(1).saturating_sub(lo).saturating_sub(ids.len() as u64);
    let mut note = None;
    if missing > LOOKUPS {
        ids.extend(listed(io, dir, after)?);
        note = Some(format!(
            "{missing} segment ids between {lo} and {hi} are in no listing of {}: too many to \
             look up one by one, so a segment a listing left out there may not have been checked \
             (a second listing was taken)",
            dir.display()
        ));
    } else {
        for id in (lo..=hi).map(SegmentId) {
            if !ids.contains(&id) && exists(io, dir, id) {
                ids.insert(id);
            }
        }
    }
    // After the newest listed: compaction can remove a segment moments after it is made, so an
    // absent id does not end the ids in use; [`PAST_ABSENT`] absent ones in a row do.
    let mut next = hi.max(lo.saturating_sub(1)).saturating_add(1);
    let mut absent = 0;
    for _ in 0..LOOKUPS {
        if exists(io, dir, SegmentId(next)) {
            ids.insert(SegmentId(next));
            absent = 0;
        } else {
            absent += 1;
            if absent > PAST_ABSENT {
                break;
            }
        }
        next = next.saturating_add(1);
    }
    Ok(Segments { ids: ids.into_iter().collect(), note })
}

/// The segment ids one listing of `dir` names, after `after`.
fn listed(
    io: &dyn Io,
    dir: &Path,
    after: Option<SegmentId>,
) -> Result<BTreeSet<SegmentId>, StoreError> {
    let names = io.list(dir).map_err(|source| StoreError::Io {
        context: format!("listing the journal directory {}", dir.display()),
        source,
    })?;
    Ok(names
        .iter()
        .filter_map(|n| SegmentId::from_file_name(n))
        .filter(|id| after.is_none_or(|a| *id > a))
        .collect())
}

/// Whether an entry named like segment `id` is in `dir`, of whatever kind (what it is, is
/// looked at before it is opened): one lookup per id.
fn exists(io: &dyn Io, dir: &Path, id: SegmentId) -> bool {
    matches!(io.entry_exists(&dir.join(id.file_name())), Ok(true))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::file::io::sim::SimDisk;

    #[test]
    fn an_id_the_listing_leaves_out_is_found_by_name_and_new_ones_after_the_newest() {
        let disk = Arc::new(SimDisk::new());
        let dir = Path::new("/d");
        disk.create_dir_all(dir).unwrap();
        for id in [1u64, 2, 3, 5, 8, 9] {
            disk.create_new(&dir.join(SegmentId(id).file_name())).unwrap();
        }
        let all = segments(&*disk, dir, None).unwrap();
        assert_eq!(all.ids, [1, 2, 3, 5, 8, 9].map(SegmentId));
        assert!(all.note.is_none());
        // The listing leaves out 3 and 8 (as a racing `getdents` can); they are looked up.
        disk.hide_from_listing(&[SegmentId(3), SegmentId(8)].map(|id| id.file_name()));
        let all = segments(&*disk, dir, None).unwrap();
        assert_eq!(all.ids, [1, 2, 3, 5, 8, 9].map(SegmentId));
        // And 9, the newest, too: the ids after the newest listed are looked up.
        disk.hide_from_listing(&[SegmentId(9)].map(|id| id.file_name()));
        assert_eq!(
            segments(&*disk, dir, Some(SegmentId(4))).unwrap().ids,
            [5, 8, 9].map(SegmentId)
        );
        assert!(segments(&*disk, dir, Some(SegmentId(9))).unwrap().ids.is_empty());
        // A segment made after the newest listed one, past ids compaction removed already.
        disk.create_new(&dir.join(SegmentId(14).file_name())).unwrap();
        disk.hide_from_listing(&[SegmentId(14).file_name()]);
        assert_eq!(segments(&*disk, dir, Some(SegmentId(8))).unwrap().ids, [9, 14].map(SegmentId));
    }
}
