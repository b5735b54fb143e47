//! What opening changes on disk, decided from what the scan found: facts in, repairs (or a
//! refusal) out. No I/O happens here, so every rule of what damage means to opening is in one
//! place and is tested without a disk.
//!
//! The rules, segment by segment in order:
//! - a segment read from its sidecar index is intact, its data ending where the sidecar says;
//! - a segment walked without damage is kept; zeros the writer put ahead of its data at the
//!   newest segment's end are cut;
//! - at the first damage, [`OnCorruption::Refuse`] refuses to open unless the walk judged it a
//!   torn tail (a crash's half-written bytes), naming the segment and byte offset; otherwise the
//!   segment is cut where its damage begins, or removed whole when that is inside its header,
//!   and every later segment is removed. Bytes cut are kept aside first, unless they can be
//!   rebuilt (the header of a segment a crash left half-created) or are acknowledged data that
//!   salvage gives up;
//! - appends go on in the newest segment kept, or in a new one when none is;
//! - the sidecar indexes kept are those read, but the newest kept segment's (appends go on in
//!   it); every other sidecar file listed is removed.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::file::format::layout::{SEGMENT_HEADER_LEN, SegmentId};
use crate::file::format::torn::TornTail;
use crate::file::format::walk::{Damage, SegmentWalk, Verdict};
use crate::file::options::OnCorruption;
use crate::{OpenError, StoreError};

/// What the scan found in one segment.
#[derive(Debug)]
pub(super) enum Found {
    /// Its sidecar index still describes it: it was read from there, intact, and its data ends
    /// at `len`.
    Sidecar { len: u64 },
    /// It was walked: where its data ends, its first damage, the torn tail it ends in.
    Walked(SegmentWalk),
    /// It was not read: the scan ended at the damage of a segment before it.
    Unread,
}

/// A segment listed, and what the scan found in it.
#[derive(Debug)]
pub(super) struct Segment {
    pub id: SegmentId,
    pub found: Found,
}

/// Bytes of a segment copied aside before they are cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Aside {
    pub id: SegmentId,
    pub bytes: Range<u64>,
}

/// A segment cut at a length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cut {
    pub id: SegmentId,
    pub at: u64,
}

/// Where appends go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Newest {
    /// In the newest segment kept, after its data, which ends at `len`.
    Kept { id: SegmentId, len: u64 },
    /// In a new segment with this id: no segment is kept.
    New(SegmentId),
}

/// What opening changes on disk (a writable open; a read-only one only reports the torn tail).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Repairs {
    /// Bytes copied aside before anything is cut, in the order of the segments.
    pub asides: Vec<Aside>,
    /// Segments removed whole, in order.
    pub removals: Vec<SegmentId>,
    /// The sidecar indexes kept: those read, but the newest kept segment's.
    pub sidecars_kept: BTreeSet<SegmentId>,
    /// The sidecar index files removed, in the order they were listed: every one not kept
    /// (damaged, left by a segment since removed or cut, or the newest kept segment's).
    pub sidecars_removed: Vec<SegmentId>,
    /// Segments cut, in order.
    pub cuts: Vec<Cut>,
    /// Where appends go on.
    pub newest: Newest,
    /// The torn tail found at the newest segment's end: reported, and cut.
    pub torn: Option<TornTail>,
}

/// Decides what opening the journal in `dir` changes, from what the scan found in each segment
/// listed (`segments`, in order) and the sidecar index files listed (`sidecars`, in the
/// listing's order), under `mode`; or why it refuses to open. See the
/// [module documentation](self).
pub(super) fn decide(
    dir: &Path,
    mode: OnCorruption,
    segments: &[Segment],
    sidecars: &[SegmentId],
) -> Result<Repairs, OpenError> {
    let mut asides = Vec::new();
    let mut removals = Vec::new();
    let mut cuts = Vec::new();
    let mut torn = None;
    // The newest segment kept so far, and where its data ends.
    let mut kept: Option<(SegmentId, u64)> = None;
    let mut from_sidecars = BTreeSet::new();
    // Set at the first damage: nothing after it counts.
    let mut stopped = false;
    for (k, s) in segments.iter().enumerate() {
        let id = s.id;
        let walk = match (&s.found, stopped) {
            (_, true) | (Found::Unread, false) => {
                debug_assert!(stopped, "the scan reads every segment up to the first damage");
                removals.push(id);
                continue;
            }
            (Found::Sidecar { len }, false) => {
                from_sidecars.insert(id);
                kept = Some((id, *len));
                continue;
            }
            (Found::Walked(walk), false) => walk,
        };
        let path = dir.join(id.file_name());
        // A newer stepjournal's bytes are refused whatever the mode: no repair cuts them.
        if let Some(d) = walk.first.as_ref().filter(|d| d.verdict == Verdict::Newer) {
            return Err(newer(&path, d));
        }
        let Some(d) = &walk.first else {
            // Zeros the writer put ahead of its data may follow it: they are cut.
            if walk.end < walk.len {
                cuts.push(Cut { id, at: walk.end });
            }
            kept = Some((id, walk.end));
            continue;
        };
        if mode == OnCorruption::Refuse {
            let last = k + 1 == segments.len();
            match d.verdict {
                Verdict::Corruption => return Err(corruption(&path, d, last)),
                Verdict::NotASegment => return Err(not_a_segment(path, d)),
                Verdict::TornTail | Verdict::Newer => {}
            }
        }
        stopped = true;
        // What is cut is kept aside first, unless it can be rebuilt (the header of a segment a
        // crash left half-created) or it is acknowledged data salvage gives up.
        let aside = match (d.verdict, &walk.torn) {
            (Verdict::TornTail, Some(t)) if t.damage.cut > 0 && t.len > 0 => {
                Some(t.damage.cut..t.damage.cut + t.len)
            }
            (Verdict::NotASegment, _) if walk.len > 0 => Some(0..walk.len),
            _ => None,
        };
        if let Some(bytes) = aside {
            asides.push(Aside { id, bytes });
        }
        if let Some(t) = &walk.torn {
            torn = Some(TornTail::new(&path, t));
        }
        if d.cut < SEGMENT_HEADER_LEN as u64 {
            removals.push(id);
        } else {
            cuts.push(Cut { id, at: d.cut });
            kept = Some((id, d.cut));
        }
    }
    debug_assert!(
        kept.is_none_or(|(id, _)| !removals.contains(&id)),
        "the segment appends go on in is not removed"
    );
    let newest = match kept {
        Some((id, len)) => {
            // Appends go on in it: the reclaim thread writes its sidecar anew once it is sealed.
            from_sidecars.remove(&id);
            Newest::Kept { id, len }
        }
        None => Newest::New(SegmentId(segments.last().map_or(1, |s| s.id.0 + 1))),
    };
    let sidecars_removed =
        sidecars.iter().copied().filter(|id| !from_sidecars.contains(id)).collect();
    Ok(Repairs {
        asides,
        removals,
        sidecars_kept: from_sidecars,
        sidecars_removed,
        cuts,
        newest,
        torn,
    })
}

/// The refusal of a newest segment whose header this journal never wrote.
fn not_a_segment(path: PathBuf, d: &Damage) -> OpenError {
    let what = format!(
        "its header is not one this journal writes ({}), and it is not what a crash leaves while \
         creating a segment",
        d.problem.to_decode_error()
    );
    OpenError::NotASegment { path, what }
}

/// The refusal of bytes of a newer format version, in any mode.
fn newer(path: &Path, d: &Damage) -> OpenError {
    OpenError::Store(StoreError::NewerFormat {
        context: format!(
            "segment {} at byte {} (nothing was cut or removed; open the journal with a newer \
             stepjournal)",
            path.display(),
            d.offset
        ),
        source: d.problem.to_decode_error(),
    })
}

/// The refusal of damage inside acknowledged data (`last`: in the newest segment).
fn corruption(path: &Path, d: &Damage, last: bool) -> OpenError {
    let why = if !last {
        "inside a sealed segment"
    } else if d.problem.inconsistent() {
        "intact bytes that contradict themselves"
    } else {
        "followed by data written after this point was durable"
    };
    OpenError::Store(StoreError::Corrupt {
        context: format!(
            "segment {} at byte {} ({why}; this is not a torn write: refusing to open; \
             OnCorruption::TruncateAtCorruption keeps what precedes it)",
            path.display(),
            d.offset
        ),
        source: d.problem.to_decode_error(),
    })
}

#[cfg(test)]
mod tests;
