//! Creating a segment file, and the I/O failure every write path reports.

use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::StoreError;
use crate::file::format::layout::{SegmentId, encode_segment_header};
use crate::file::io::{Io, IoFile};

/// A failed write or sync: what was being done, and the OS error.
#[derive(Debug)]
pub(crate) struct IoFailure {
    pub context: String,
    pub source: io::Error,
    /// Whether it came after a group's bytes may have reached the segment (its write failed part
    /// way, or its sync failed): the group may be found there on the next open.
    pub may_have_landed: bool,
}

impl IoFailure {
    /// A failure before anything of the group was written.
    pub(crate) fn new(context: String, source: io::Error) -> IoFailure {
        IoFailure { context, source, may_have_landed: false }
    }

    /// A failure of a group's write, or of the sync after it.
    pub(crate) fn after_write(context: String, source: io::Error) -> IoFailure {
        IoFailure { context, source, may_have_landed: true }
    }

    /// The same failure, told again to a later write or sync that was refused because of it:
    /// its context and the OS error's kind and text, with nothing of the later group written.
    pub(crate) fn repeated(&self) -> IoFailure {
        IoFailure::new(
            self.context.clone(),
            io::Error::new(self.source.kind(), self.source.to_string()),
        )
    }

    /// The error a caller of the failed group gets.
    pub(crate) fn to_store_error(&self) -> StoreError {
        StoreError::Io {
            context: self.context.clone(),
            source: io::Error::new(self.source.kind(), self.source.to_string()),
        }
    }
}

impl std::fmt::Display for IoFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.context, self.source)
    }
}

/// Creates segment `id` in `dir`: the file, its header, synced, and the directory synced.
pub(crate) fn create_segment(
    io: &dyn Io,
    dir: &Path,
    id: SegmentId,
) -> Result<Arc<dyn IoFile>, IoFailure> {
    let path = dir.join(id.file_name());
    let at = |what: &str| format!("{what} segment {}", path.display());
    let file = io.create_new(&path).map_err(|e| IoFailure::new(at("creating"), e))?;
    file.write_all_at(&encode_segment_header(id), 0)
        .map_err(|e| IoFailure::new(at("writing the header of"), e))?;
    file.sync_data().map_err(|e| IoFailure::new(at("fdatasync of the new"), e))?;
    io.sync_dir(dir).map_err(|e| {
        IoFailure::new(format!("syncing directory {} after creating {}", dir.display(), id), e)
    })?;
    Ok(file)
}
