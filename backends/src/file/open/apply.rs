//! Carrying out what `decide` decided, for a writable open, in an order that is safe to crash
//! in at every step: the copies kept aside made durable before anything they hold is cut;
//! segments removed and sidecar indexes not kept removed, then the directory synced; the cuts
//! made and synced; then the segment appends go on in made durable, or created.

use std::path::Path;
use std::sync::Arc;

use super::aside::set_aside;
use super::decide::{Newest, Repairs};
use super::scan::Recent;
use super::{failure, io_error};
use crate::OpenError;
use crate::file::commit::segment::create_segment;
use crate::file::commit::state::Active;
use crate::file::files::SegmentFiles;
use crate::file::format::layout::{SEGMENT_HEADER_LEN, SegmentId};
use crate::file::format::torn::TornTail;
use crate::file::index::Index;
use crate::file::io::{Io, IoFile};
use crate::file::space::sidecar;

/// Makes the repairs to the journal in `dir` (its segments' files from `recent`, or else the
/// cache `files`), marks the sidecar indexes kept in `index`, and returns the active segment,
/// pinned in `files`, and the torn tail, with where its bytes were kept.
pub(super) fn apply(
    io: &dyn Io,
    dir: &Path,
    repairs: Repairs,
    recent: &Recent,
    files: &SegmentFiles,
    index: &mut Index,
) -> Result<(Active, Option<TornTail>), OpenError> {
    let Repairs { asides, removals, sidecars_kept, sidecars_removed, cuts, newest, mut torn } =
        repairs;
    let file = |id: SegmentId| -> Result<Arc<dyn IoFile>, OpenError> {
        let path = dir.join(id.file_name());
        recent.file(id, files).map_err(io_error(format!("opening segment {}", path.display())))
    };
    for a in &asides {
        let kept = set_aside(io, dir, a.id, &*file(a.id)?, a.bytes.clone()).map_err(failure)?;
        #[cfg(feature = "tracing")]
        for old in &kept.removed {
            tracing::warn!(
                journal = %dir.display(),
                removed = %old.display(),
                kept = %kept.path.display(),
                "stepjournal removed an old copy of cut bytes: at most {} copies of one place are kept",
                crate::file::options::TORN_COPIES_KEPT
            );
        }
        if let Some(t) = torn.as_mut().filter(|t| t.offset == a.bytes.start) {
            t.kept_in = Some(kept.path);
            t.copies_removed = kept.removed;
        }
    }
    if !asides.is_empty() {
        // The copies are durable before anything they hold is cut.
        io.sync_dir(dir).map_err(io_error(format!("syncing directory {}", dir.display())))?;
    }
    for id in &removals {
        let path = dir.join(id.file_name());
        io.remove(&path).map_err(io_error(format!("removing segment {}", path.display())))?;
    }
    for id in &sidecars_removed {
        sidecar::remove(io, dir, *id).map_err(failure)?;
    }
    for id in &sidecars_kept {
        if let Some(s) = index.segments.get_mut(id) {
            s.sidecar = true;
        }
    }
    // Always: a process that died may have created or removed a segment without syncing the
    // directory, and what it left is about to be counted on.
    io.sync_dir(dir).map_err(io_error(format!("syncing directory {}", dir.display())))?;
    for c in &cuts {
        let path = dir.join(c.id.file_name());
        let what = format!("cutting segment {} at byte {}", path.display(), c.at);
        let f = file(c.id)?;
        f.set_len(c.at).map_err(io_error(what.clone()))?;
        f.sync_data().map_err(io_error(what))?;
    }
    let active = match newest {
        Newest::Kept { id, len } => {
            let f = file(id)?;
            if !cuts.iter().any(|c| c.id == id) {
                // Bytes a crashed process wrote may not be durable yet: later groups claim them
                // as durable, so make them so. (A cut is synced with what precedes it.)
                f.sync_data().map_err(io_error(format!(
                    "fdatasync of segment {}",
                    dir.join(id.file_name()).display()
                )))?;
            }
            Active::new(id, f, len)
        }
        Newest::New(id) => {
            let f = create_segment(io, dir, id).map_err(failure)?;
            index.add_segment(id);
            Active::new(id, f, SEGMENT_HEADER_LEN as u64)
        }
    };
    files.put(active.id, Arc::clone(&active.file), true);
    Ok((active, torn))
}
