//! The in-memory index: where each session's batches are, and which segments still matter.
//!
//! Per session it keeps one [`Run`] per batch (not an entry per event). Per segment it keeps how
//! many batches there are still live, and the deletion frames it holds that must stay on disk.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::io::IoFile;
use super::layout::SegmentId;

/// One batch of a session: `count` events from `first`, in one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    /// The batch's first sequence number.
    pub first: u64,
    /// How many events it holds.
    pub count: u32,
    /// The frame's length in bytes.
    pub len: u32,
    /// The segment holding the frame.
    pub seg: SegmentId,
    /// The frame's offset in its segment.
    pub offset: u64,
}

impl Run {
    pub(crate) fn end(&self) -> u64 {
        self.first + u64::from(self.count)
    }
}

/// A session's batches.
#[derive(Debug, Default)]
pub(crate) struct SessionLog {
    // Invariant: dense from 0: runs[0].first == 0, runs[i + 1].first == runs[i].end(); never empty
    // while the session is in the index.
    pub runs: Vec<Run>,
}

impl SessionLog {
    pub(crate) fn tail(&self) -> u64 {
        self.runs.last().map_or(0, Run::end)
    }

    /// The runs holding any of `start..end`.
    pub(crate) fn overlapping(&self, start: u64, end: u64) -> &[Run] {
        let from = self.runs.partition_point(|r| r.end() <= start);
        let to = self.runs.partition_point(|r| r.first < end);
        self.runs.get(from..to.max(from)).unwrap_or_default()
    }
}

/// A deletion frame that must stay: the segments that still hold frames of the session it
/// deleted, from before it.
#[derive(Debug)]
pub(crate) struct Guard {
    // Invariant: never empty (an empty guard is dropped); every id is older than the guard's own
    // segment.
    pub older: BTreeSet<SegmentId>,
}

/// What the index knows of one segment.
#[derive(Debug)]
pub(crate) struct SegmentInfo {
    pub file: Arc<dyn IoFile>,
    /// Events frames here whose session has not been deleted since.
    pub live: u64,
    /// Deletion frames here that must stay.
    pub guards: Vec<Guard>,
}

/// Sessions and segments.
#[derive(Debug, Default)]
pub(crate) struct Index {
    pub sessions: BTreeMap<String, SessionLog>,
    pub segments: BTreeMap<SegmentId, SegmentInfo>,
}

impl Index {
    pub(crate) fn tail(&self, session: &str) -> u64 {
        self.sessions.get(session).map_or(0, SessionLog::tail)
    }

    pub(crate) fn add_segment(&mut self, id: SegmentId, file: Arc<dyn IoFile>) {
        self.segments.insert(id, SegmentInfo { file, live: 0, guards: Vec::new() });
    }

    /// Records a batch at the session's tail. `Err` (and nothing changed) when it does not start
    /// at the tail.
    pub(crate) fn push(&mut self, session: &str, run: Run) -> Result<(), u64> {
        let tail = self.tail(session);
        if run.first != tail || run.count == 0 {
            return Err(tail);
        }
        match self.sessions.get_mut(session) {
            Some(log) => log.runs.push(run),
            None => {
                self.sessions.insert(session.to_owned(), SessionLog { runs: vec![run] });
            }
        }
        if let Some(seg) = self.segments.get_mut(&run.seg) {
            seg.live += 1;
        }
        Ok(())
    }

    /// Records that `session` was deleted by a frame in segment `at`; returns whether it had
    /// events.
    pub(crate) fn delete(&mut self, session: &str, at: SegmentId) -> bool {
        let Some(log) = self.sessions.remove(session) else { return false };
        let mut older = BTreeSet::new();
        for run in &log.runs {
            if let Some(seg) = self.segments.get_mut(&run.seg) {
                debug_assert!(seg.live > 0, "a live run's segment counts it");
                seg.live = seg.live.saturating_sub(1);
            }
            if run.seg != at {
                older.insert(run.seg);
            }
        }
        if let (false, Some(seg)) = (older.is_empty(), self.segments.get_mut(&at)) {
            seg.guards.push(Guard { older });
        }
        true
    }

    /// A segment other than `active` that holds nothing needed: no live batch, no deletion frame
    /// that must stay.
    pub(crate) fn removable(&self, active: Option<SegmentId>) -> Option<SegmentId> {
        self.segments
            .iter()
            .find(|(id, s)| Some(**id) != active && s.live == 0 && s.guards.is_empty())
            .map(|(id, _)| *id)
    }

    /// Forgets a segment whose removal is durable: deletion frames that guarded it need it no
    /// more.
    pub(crate) fn forget(&mut self, id: SegmentId) {
        self.segments.remove(&id);
        for seg in self.segments.values_mut() {
            for g in &mut seg.guards {
                g.older.remove(&id);
            }
            seg.guards.retain(|g| !g.older.is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::io::Io;
    use crate::file::sim::SimDisk;

    fn file() -> Arc<dyn IoFile> {
        let disk = SimDisk::new();
        disk.create_dir_all(std::path::Path::new("/d")).unwrap();
        disk.create_new(std::path::Path::new("/d/f")).unwrap()
    }

    fn run(first: u64, count: u32, seg: u64) -> Run {
        Run { first, count, len: 100, seg: SegmentId(seg), offset: 32 }
    }

    #[test]
    fn a_batch_lands_only_at_the_tail() {
        let mut ix = Index::default();
        ix.add_segment(SegmentId(1), file());
        ix.push("s", run(0, 3, 1)).unwrap();
        assert_eq!(ix.push("s", run(4, 1, 1)), Err(3));
        assert_eq!(ix.push("t", run(1, 1, 1)), Err(0));
        ix.push("s", run(3, 2, 1)).unwrap();
        assert_eq!(ix.tail("s"), 5);
        let log = &ix.sessions["s"];
        assert_eq!(log.overlapping(0, 1).len(), 1);
        assert_eq!(log.overlapping(2, 4).len(), 2);
        assert_eq!(log.overlapping(5, 9).len(), 0);
        assert_eq!(log.overlapping(4, 2).len(), 0);
    }

    #[test]
    fn a_deletion_frame_stays_while_older_frames_of_its_session_remain() {
        let mut ix = Index::default();
        for id in 1..=3 {
            ix.add_segment(SegmentId(id), file());
        }
        ix.push("s", run(0, 1, 1)).unwrap();
        ix.push("other", run(0, 1, 1)).unwrap();
        ix.push("s", run(1, 1, 2)).unwrap();
        assert!(ix.delete("s", SegmentId(3)));
        assert!(!ix.delete("s", SegmentId(3)));
        // Segment 2 holds only dead frames; 3 guards them and 1; 1 holds a live one.
        assert_eq!(ix.removable(Some(SegmentId(3))), Some(SegmentId(2)));
        ix.forget(SegmentId(2));
        assert_eq!(ix.removable(None), None, "3 still guards 1");
        assert!(ix.delete("other", SegmentId(3)));
        assert_eq!(ix.removable(None), Some(SegmentId(1)));
        ix.forget(SegmentId(1));
        assert_eq!(ix.removable(None), Some(SegmentId(3)));
    }
}
