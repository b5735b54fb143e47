//! Scanning a journal directory for opening: every entry named like a segment looked at, then
//! each segment read in order, its frames fed to the index builder, up to the first damage. A
//! sealed segment with a sidecar index that still describes it is read from the sidecar; every
//! other segment (the newest always) is walked. The scan gathers the facts `decide` judges and
//! writes nothing.

use std::io;
use std::path::Path;
use std::sync::Arc;

use stepjournal_codec::Limits;

use super::decide::{Found, Segment};
use super::io_error;
use crate::OpenError;
use crate::file::files::SegmentFiles;
use crate::file::format::heads::BatchHead;
use crate::file::format::layout::SegmentId;
use crate::file::format::names;
use crate::file::format::walk::{Damage, Flow, FrameKindInfo, GroupView, Visit, walk_segment};
use crate::file::index::BatchLoc;
use crate::file::index::builder::{IndexBuilder, Misfit};
use crate::file::io::{EntryKind, Io, IoFile};
use crate::file::options::{FileOptions, OnCorruption};
use crate::file::space::sidecar::{self, Loaded};

/// What a scan found.
#[derive(Debug)]
pub(super) struct Scan {
    /// Every segment listed, in order, with what was found in it.
    pub segments: Vec<Segment>,
    /// The sidecar index files listed, in the listing's order.
    pub sidecars: Vec<SegmentId>,
    /// The index, built from the frames read.
    pub builder: IndexBuilder,
    /// The files of the segments read last, for the repairs.
    pub recent: Recent,
}

/// The files of the last two segments read, kept open for the repairs: every cut and every
/// copy aside is of the last segment read, and appends go on in it or, when it is removed
/// whole, in the one before it.
#[derive(Debug, Default)]
pub(super) struct Recent(Vec<(SegmentId, Arc<dyn IoFile>)>);

impl Recent {
    fn keep(&mut self, id: SegmentId, file: &Arc<dyn IoFile>) {
        if self.0.len() == 2 {
            self.0.remove(0);
        }
        self.0.push((id, Arc::clone(file)));
    }

    /// The file of segment `id`: one kept, or else the cache's.
    pub(super) fn file(&self, id: SegmentId, files: &SegmentFiles) -> io::Result<Arc<dyn IoFile>> {
        match self.0.iter().find(|(kept, _)| *kept == id) {
            Some((_, file)) => Ok(Arc::clone(file)),
            None => files.get(id),
        }
    }
}

/// Adds each intact group's frames to the index being built. With `stop` (salvage after a
/// misfit), the group that holds the frame at `stop` is refused, and the walk stops there.
struct Indexer<'a> {
    builder: &'a mut IndexBuilder,
    seg: SegmentId,
    stop: Option<&'a Misfit>,
    limits: &'a Limits,
}

impl Visit for Indexer<'_> {
    fn group(&mut self, g: &GroupView<'_>) -> Result<(), (usize, String)> {
        if let Some(m) = self.stop.filter(|m| m.seg == self.seg)
            && let Some(i) = g.frames.iter().position(|f| f.offset >= m.offset)
        {
            return Err((i, m.reason()));
        }
        for f in g.frames {
            let s = g.session(f);
            match f.kind {
                FrameKindInfo::Events { first, count } => {
                    let run =
                        BatchLoc { first, count, len: f.len, seg: self.seg, offset: f.offset };
                    // A batch of one event (the usual) is known from the header the walk read.
                    let one = f.first_record.filter(|_| count == 1);
                    let head = one
                        .and_then(|(kind, at)| BatchHead::of_one(kind, at))
                        .unwrap_or_else(|| BatchHead::of_frame(g.frame_bytes(f), self.limits));
                    self.builder.events(s, run, head);
                }
                FrameKindInfo::Delete => self.builder.delete(s, self.seg),
            }
        }
        Ok(())
    }

    fn damage(&mut self, _: &Damage, _: Option<&GroupView<'_>>) -> Flow {
        Flow::Stop
    }
}

/// Scans the journal in `dir`, opening segments through `files`; with `stop`, the walk refuses
/// the group that holds that misfit and stops there; without `sidecars`, every segment is
/// walked. `None`: read-only, and a segment listed was gone when it was read (a live writer
/// removed it).
pub(super) fn scan(
    io: &dyn Io,
    dir: &Path,
    options: &FileOptions,
    stop: Option<&Misfit>,
    files: &SegmentFiles,
    sidecars: bool,
) -> Result<Option<Scan>, OpenError> {
    let read_only = options.read_only;
    let listed = io
        .list(dir)
        .map_err(io_error(format!("listing the journal directory {}", dir.display())))?;
    let mut ids: Vec<SegmentId> =
        listed.iter().filter_map(|n| SegmentId::from_file_name(n)).collect();
    ids.sort_unstable();
    if read_only {
        // Beside a live writer a listing can leave out a segment that is there all along
        // (`listing`): a deletion frame in it left out would bring its session back.
        // The ids of this listing, completed (not a second listing).
        let listed = ids.into_iter().collect();
        ids = crate::file::listing::complete(io, dir, listed, None).map_err(OpenError::Store)?.ids;
    }
    let listed_sidecars = listed.iter().filter_map(|n| names::sidecar_id(n)).collect();
    // Every entry is looked at before any is opened (opening a named pipe would wait for a
    // writer): one that is not a regular file is refused, whatever else is found.
    for &id in &ids {
        let path = dir.join(id.file_name());
        match io
            .entry_kind(&path)
            .map_err(io_error(format!("looking at segment {}", path.display())))?
        {
            Some(EntryKind::File) => {}
            None if read_only => return Ok(None),
            None => {
                let e = io::Error::new(io::ErrorKind::NotFound, "removed since it was listed");
                return Err(io_error(format!("opening segment {}", path.display()))(e));
            }
            Some(kind) => {
                let what = format!("is {kind}, not a regular file");
                return Err(OpenError::NotASegment { path, what });
            }
        }
    }

    let mut builder = IndexBuilder::default();
    let mut recent = Recent::default();
    let mut segments = Vec::with_capacity(ids.len());
    let mut buf = Vec::new();
    // Set at the first damage: what follows it is not read.
    let mut ended = false;
    for (k, &id) in ids.iter().enumerate() {
        if ended {
            segments.push(Segment { id, found: Found::Unread });
            continue;
        }
        let path = dir.join(id.file_name());
        // Opened through the cache, which keeps it open while it has room (a journal of few
        // segments stays open whole) and closes others when the process is at its limit.
        let file = match files.get(id) {
            Ok(f) => f,
            Err(e) if read_only && e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error(format!("opening segment {}", path.display()))(e)),
        };
        builder.add_segment(id);
        recent.keep(id, &file);
        let last = k + 1 == ids.len();
        // Salvage scans every byte: it is asked for to find damage and stop before it.
        if !last
            && sidecars
            && options.on_corruption == OnCorruption::Refuse
            && let Loaded::Frames(f) = sidecar::load(io, dir, id, &*file, &options.limits)
        {
            segments.push(Segment { id, found: Found::Sidecar { len: f.len } });
            f.feed(&mut builder, id);
            continue;
        }
        let mut indexer = Indexer { builder: &mut builder, seg: id, stop, limits: &options.limits };
        let walk = walk_segment(&*file, id, last, &options.limits, &mut buf, &mut indexer)
            .map_err(io_error(format!("reading segment {}", path.display())))?;
        ended = walk.first.is_some();
        segments.push(Segment { id, found: Found::Walked(walk) });
    }
    Ok(Some(Scan { segments, sidecars: listed_sidecars, builder, recent }))
}
