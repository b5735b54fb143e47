//! The in-memory index: where each session's batches are, and which segments still matter.
//!
//! Per session it keeps one [`BatchLoc`] per batch (not an entry per event). Per segment it keeps how
//! many batches (and bytes) there are still live, and the deletion frames it holds that must
//! stay on disk.
//!
//! A session's frames appear in the log in order, except for copies compaction made of live
//! frames: those come later than frames with higher sequence numbers, and after a crash during
//! compaction the original and the copy may both be on disk. So on open (`builder`) a session's
//! runs are collected, sorted and deduplicated (the latest copy wins), and checked to be dense at
//! the end; a deletion frame drops every run collected for its session so far.
//!
//! The builder lives here, beside what it builds, rather than with opening: opening scans into
//! it, and so do the sidecar indexes (`space`) opening reads and the check of a directory
//! (`verify`), so it comes before all three.
//!
//! `names` numbers the sessions' names for the builder and puts them in order at the end.

pub(crate) mod builder;
mod names;

use std::collections::{BTreeMap, BTreeSet};

use super::format::layout::{GROUP_HEADER_LEN, SEGMENT_HEADER_LEN, SegmentId};
use crate::RunHead;

/// One batch of a session: `count` events from `first`, in one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchLoc {
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

impl BatchLoc {
    /// The sequence number after the batch (saturating: a damaged journal may claim a batch
    /// past the last sequence number).
    pub(crate) fn end(&self) -> u64 {
        self.first.saturating_add(u64::from(self.count))
    }
}

/// A session's batches, and its head.
#[derive(Debug, Default)]
pub(crate) struct SessionLog {
    // Invariant: dense from the log's start: runs[0].first is 0, or, once a trim dropped the
    // batches before it, the first of the batch holding the trim's `before`;
    // runs[i + 1].first == runs[i].end(); never empty while the session is in the index.
    pub runs: Vec<BatchLoc>,
    /// Segments that still hold stale copies of this session's frames (left by compaction).
    pub shadows: BTreeSet<SegmentId>,
    /// Its last run, as the events of `runs` leave it (`RunHead::advance` over them in order).
    pub head: RunHead,
    /// When its last batch was appended (unix milliseconds).
    pub last_at: u64,
    /// The seq of its newest `snapshot` record, if it holds one: where `read_from_snapshot`
    /// starts reading.
    // Invariant: below `tail()`, and no batch of `runs` holds a snapshot after it.
    pub snapshot: Option<u64>,
}

impl SessionLog {
    /// Whether the invariant on `runs` holds: dense from their start and not empty.
    pub(crate) fn is_dense(&self) -> bool {
        let mut tail = self.runs.first().map_or(0, |r| r.first);
        for run in &self.runs {
            if run.first != tail || run.count == 0 {
                return false;
            }
            tail = run.end();
        }
        !self.runs.is_empty()
    }

    pub(crate) fn tail(&self) -> u64 {
        self.runs.last().map_or(0, BatchLoc::end)
    }

    /// The runs holding any of `start..end`.
    pub(crate) fn overlapping(&self, start: u64, end: u64) -> &[BatchLoc] {
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

/// What the index knows of one segment (its file is opened when needed: `files`).
#[derive(Debug, Default)]
pub(crate) struct SegmentInfo {
    /// Events frames here that are the current home of a live batch.
    pub live: u64,
    /// Their bytes.
    pub live_bytes: u64,
    /// Deletion frames here that must stay.
    pub guards: Vec<Guard>,
    /// Whether its sidecar index is written (or need not be: it was found damaged).
    pub sidecar: bool,
    /// Whether compaction found a damaged batch in it: it is left as it is, never compacted
    /// (removed once nothing in it is needed).
    pub damaged: bool,
    /// Its length in bytes, once it is sealed and the reclaim thread measured it (a sealed
    /// segment never changes length).
    pub len: Option<u64>,
}

impl SegmentInfo {
    /// Its bytes that hold no live batch (headers, deletion frames, dead and moved batches),
    /// once its length is known.
    fn dead(&self) -> Option<u64> {
        self.len.map(|len| len.saturating_sub(self.live_bytes))
    }
}

/// When compacting a sealed segment is worth it, and what it may cost.
///
/// Compacting segment `s` removes its `len` bytes and writes its live batches again, in at most
/// `chunks` groups, each of which may start a new segment: the bytes of all segments together
/// change by `chunks × (GROUP_HEADER_LEN + SEGMENT_HEADER_LEN) − dead(s)` at most. A segment is
/// compacted only when that is negative, so with no appends each compaction strictly lowers the
/// journal's size in bytes, and compaction ends, whatever the options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Compaction {
    /// The fewest dead bytes a sealed segment must hold to be compacted (`None`: never).
    pub dead_at_least: Option<u64>,
    /// The most bytes one chunk of a compaction writes as one group (a larger batch is written
    /// alone).
    pub chunk: u64,
}

impl Compaction {
    /// The most bytes copying `live` batches of `live_bytes` in all writes besides the batches:
    /// a group header per chunk, and a segment header per chunk should each start a segment.
    /// Chunks are filled greedily, so two chunks in a row hold more than `chunk` bytes.
    pub(crate) fn overhead(&self, live: u64, live_bytes: u64) -> u64 {
        let chunks = live.min(2 * (live_bytes / self.chunk.saturating_add(1)) + 1);
        chunks.saturating_mul((GROUP_HEADER_LEN + SEGMENT_HEADER_LEN) as u64)
    }

    /// Whether compacting `s` is worth it: dead enough, and freeing more than it writes.
    fn worth(&self, s: &SegmentInfo) -> bool {
        match (self.dead_at_least, s.dead()) {
            (Some(least), Some(dead)) => {
                !s.damaged && dead >= least && dead > self.overhead(s.live, s.live_bytes)
            }
            _ => false,
        }
    }
}

/// Sessions and segments.
#[derive(Debug, Default)]
pub(crate) struct Index {
    pub sessions: BTreeMap<String, SessionLog>,
    pub segments: BTreeMap<SegmentId, SegmentInfo>,
}

/// What to do with a segment to free its space.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reclaim {
    /// Nothing in it is needed: remove it.
    Remove(SegmentId),
    /// Few of its batches are live: copy them to the active segment, then remove it.
    Compact(SegmentId, Vec<(String, BatchLoc)>),
}

impl Index {
    pub(crate) fn tail(&self, session: &str) -> u64 {
        self.sessions.get(session).map_or(0, SessionLog::tail)
    }

    pub(crate) fn add_segment(&mut self, id: SegmentId) {
        self.segments.insert(id, SegmentInfo::default());
    }

    pub(crate) fn count_live(&mut self, run: &BatchLoc, add: bool) {
        if let Some(seg) = self.segments.get_mut(&run.seg) {
            if add {
                seg.live += 1;
                seg.live_bytes += u64::from(run.len);
            } else {
                debug_assert!(seg.live > 0, "a live run's segment counts it");
                seg.live = seg.live.saturating_sub(1);
                seg.live_bytes = seg.live_bytes.saturating_sub(u64::from(run.len));
            }
        }
    }

    /// Records a batch at the session's tail, appended at `last_at`; `head` is the session's
    /// head after it when the batch changes it, `snapshot` the seq of the batch's last
    /// `snapshot` record when it holds one. `Err` (and nothing changed) when it does not start
    /// at the tail.
    pub(crate) fn push(
        &mut self,
        session: &str,
        run: BatchLoc,
        last_at: u64,
        head: Option<RunHead>,
        snapshot: Option<u64>,
    ) -> Result<(), u64> {
        let tail = self.tail(session);
        if run.first != tail || run.count == 0 {
            return Err(tail);
        }
        debug_assert!(
            snapshot.is_none_or(|s| s >= run.first && s < run.end()),
            "a batch's snapshot lies in it: {snapshot:?} in {run:?}"
        );
        match self.sessions.get_mut(session) {
            Some(log) => {
                // The check above keeps the runs dense: the new one starts where they end.
                debug_assert!(log.runs.last().is_some_and(|last| last.end() == run.first));
                log.runs.push(run);
                log.last_at = last_at;
                if let Some(head) = head {
                    log.head = head;
                }
                if snapshot.is_some() {
                    log.snapshot = snapshot;
                }
            }
            None => {
                debug_assert_eq!(run.first, 0, "a session's first batch starts at seq 0");
                let log = SessionLog {
                    runs: vec![run],
                    shadows: BTreeSet::new(),
                    head: head.unwrap_or_default(),
                    last_at,
                    snapshot,
                };
                self.sessions.insert(session.to_owned(), log);
            }
        }
        self.count_live(&run, true);
        Ok(())
    }

    /// Drops the batches of `session` that end at or before `before` (a `trimmed` event's,
    /// in a batch just pushed): they are no longer live, and their segments hold stale frames
    /// of the session until removed (a later deletion guards them, as it guards a moved batch's
    /// old place). A batch holding `before` stays whole: the log then starts a few events
    /// before it. The batch that holds the `trimmed` lies after `before`, so it stays.
    pub(crate) fn trim(&mut self, session: &str, before: u64) {
        let Some(log) = self.sessions.get_mut(session) else { return };
        let cut = log.runs.partition_point(|r| r.end() <= before);
        if cut == 0 || cut >= log.runs.len() {
            debug_assert!(cut < log.runs.len(), "a trim keeps the batch that holds it");
            return;
        }
        let dropped: Vec<BatchLoc> = log.runs.drain(..cut).collect();
        log.shadows.extend(dropped.iter().map(|r| r.seg));
        debug_assert!(log.is_dense(), "the kept batches continue each other");
        for run in &dropped {
            self.count_live(run, false);
        }
    }

    /// The session's head, as the index holds it (the default for a session with no events).
    pub(crate) fn head(&self, session: &str) -> RunHead {
        self.sessions.get(session).map(|l| l.head.clone()).unwrap_or_default()
    }

    /// Records that `session` was deleted by a frame in segment `at`; returns whether it had
    /// events.
    pub(crate) fn delete(&mut self, session: &str, at: SegmentId) -> bool {
        let Some(log) = self.sessions.remove(session) else { return false };
        for run in &log.runs {
            self.count_live(run, false);
        }
        let segs = log.runs.iter().map(|r| r.seg).chain(log.shadows.iter().copied());
        self.guard(at, segs);
        true
    }

    /// Makes the deletion frame in `at` stay while any of `segs` (other than `at`) exists.
    pub(crate) fn guard(&mut self, at: SegmentId, segs: impl Iterator<Item = SegmentId>) {
        let older: BTreeSet<SegmentId> =
            segs.filter(|s| *s != at && self.segments.contains_key(s)).collect();
        debug_assert!(
            older.iter().all(|s| *s < at),
            "a deletion frame comes after every frame of its session it hides"
        );
        if let (false, Some(seg)) = (older.is_empty(), self.segments.get_mut(&at)) {
            seg.guards.push(Guard { older });
        }
    }

    /// A sealed segment (other than `active`) whose sidecar index is not written yet.
    pub(crate) fn without_sidecar(&self, active: Option<SegmentId>) -> Option<SegmentId> {
        self.segments.iter().find(|(id, s)| Some(**id) != active && !s.sidecar).map(|(id, _)| *id)
    }

    /// A segment other than `active` with nothing needed in it, if there is one.
    pub(crate) fn unneeded(&self, active: Option<SegmentId>) -> Option<SegmentId> {
        self.segments
            .iter()
            .find(|(id, s)| Some(**id) != active && s.live == 0 && s.guards.is_empty())
            .map(|(id, _)| *id)
    }

    /// A sealed segment (other than `active`) whose length is not known yet.
    pub(crate) fn unmeasured(&self, active: Option<SegmentId>) -> Option<SegmentId> {
        self.segments
            .iter()
            .find(|(id, s)| Some(**id) != active && s.len.is_none())
            .map(|(id, _)| *id)
    }

    /// The next thing to do to free space, if any: a segment other than `active` with nothing
    /// needed in it, or else the oldest sealed segment that holds no deletion frame that must
    /// stay and that `policy` finds worth compacting.
    pub(crate) fn reclaim(
        &self,
        active: Option<SegmentId>,
        policy: &Compaction,
    ) -> Option<Reclaim> {
        if let Some(id) = self.unneeded(active) {
            return Some(Reclaim::Remove(id));
        }
        let (id, _) = self
            .segments
            .iter()
            .find(|(id, s)| Some(**id) != active && s.guards.is_empty() && policy.worth(s))?;
        let mut live = Vec::new();
        for (name, log) in &self.sessions {
            live.extend(log.runs.iter().filter(|r| r.seg == *id).map(|r| (name.clone(), *r)));
        }
        Some(Reclaim::Compact(*id, live))
    }

    /// Whether `run` is where the index finds that batch of `session` now: it was neither
    /// moved nor deleted since it was looked up.
    pub(crate) fn is_home(&self, session: &str, run: &BatchLoc) -> bool {
        let Some(log) = self.sessions.get(session) else { return false };
        let i = log.runs.partition_point(|r| r.first < run.first);
        log.runs.get(i).is_some_and(|r| r == run)
    }

    /// A batch of `session` copied to a new place: the copy is its home from now on, and the old
    /// segment holds a stale copy until it is removed.
    pub(crate) fn moved(&mut self, session: &str, first: u64, seg: SegmentId, offset: u64) {
        let Some(log) = self.sessions.get_mut(session) else { return };
        let i = log.runs.partition_point(|r| r.first < first);
        let Some(run) = log.runs.get_mut(i).filter(|r| r.first == first) else { return };
        let old = *run;
        debug_assert!(seg >= old.seg, "compaction copies a batch to a newer segment");
        run.seg = seg;
        run.offset = offset;
        log.shadows.insert(old.seg);
        let new = *run;
        self.count_live(&old, false);
        self.count_live(&new, true);
    }

    /// Forgets a segment whose removal is durable: deletion frames that guarded it need it no
    /// more.
    pub(crate) fn forget(&mut self, id: SegmentId) {
        debug_assert!(
            self.segments.get(&id).is_none_or(|s| s.live == 0 && s.guards.is_empty()),
            "segment {id} is removed only once nothing in it is needed"
        );
        debug_assert!(
            self.sessions.values().all(|log| log.runs.iter().all(|r| r.seg != id)),
            "no batch's home is in removed segment {id}"
        );
        self.segments.remove(&id);
        for seg in self.segments.values_mut() {
            for g in &mut seg.guards {
                g.older.remove(&id);
            }
            seg.guards.retain(|g| !g.older.is_empty());
            debug_assert!(seg.guards.iter().all(|g| g.older.iter().all(|s| *s != id)));
        }
        for log in self.sessions.values_mut() {
            log.shadows.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first: u64, count: u32, seg: u64) -> BatchLoc {
        BatchLoc { first, count, len: 100, seg: SegmentId(seg), offset: 32 + first }
    }

    #[test]
    fn a_batch_lands_only_at_the_tail() {
        let mut ix = Index::default();
        ix.add_segment(SegmentId(1));
        ix.push("s", run(0, 3, 1), 0, None, None).unwrap();
        assert_eq!(ix.push("s", run(4, 1, 1), 0, None, None), Err(3));
        assert_eq!(ix.push("t", run(1, 1, 1), 0, None, None), Err(0));
        ix.push("s", run(3, 2, 1), 0, None, None).unwrap();
        assert_eq!(ix.tail("s"), 5);
        let log = &ix.sessions["s"];
        assert_eq!(log.overlapping(0, 1).len(), 1);
        assert_eq!(log.overlapping(2, 4).len(), 2);
        assert_eq!(log.overlapping(5, 9).len(), 0);
        assert_eq!(log.overlapping(4, 2).len(), 0);
    }

    #[test]
    fn the_newest_snapshot_is_kept_as_batches_land_and_forgotten_on_delete() {
        let mut ix = Index::default();
        ix.add_segment(SegmentId(1));
        ix.push("s", run(0, 3, 1), 0, None, Some(1)).unwrap();
        ix.push("s", run(3, 2, 1), 0, None, None).unwrap();
        assert_eq!(ix.sessions["s"].snapshot, Some(1), "a batch without one keeps it");
        assert_eq!(ix.push("s", run(6, 1, 1), 0, None, Some(6)), Err(5));
        assert_eq!(ix.sessions["s"].snapshot, Some(1), "a refused batch changes nothing");
        ix.push("s", run(5, 2, 1), 0, None, Some(6)).unwrap();
        assert_eq!(ix.sessions["s"].snapshot, Some(6));
        assert!(ix.delete("s", SegmentId(1)));
        ix.push("s", run(0, 1, 1), 0, None, None).unwrap();
        assert_eq!(ix.sessions["s"].snapshot, None, "a recreated session has none");
    }

    #[test]
    fn a_deletion_frame_stays_while_older_frames_of_its_session_remain() {
        let mut ix = Index::default();
        for id in 1..=3 {
            ix.add_segment(SegmentId(id));
        }
        ix.push("s", run(0, 1, 1), 0, None, None).unwrap();
        ix.push("other", run(0, 1, 1), 0, None, None).unwrap();
        ix.push("s", run(1, 1, 2), 0, None, None).unwrap();
        assert!(ix.delete("s", SegmentId(3)));
        assert!(!ix.delete("s", SegmentId(3)));
        // Segment 2 holds only dead frames; 3 guards them and 1; 1 holds a live one.
        let never = Compaction { dead_at_least: None, chunk: 1 << 16 };
        let eager = Compaction { dead_at_least: Some(1), chunk: 1 << 16 };
        assert_eq!(ix.reclaim(Some(SegmentId(3)), &eager), Some(Reclaim::Remove(SegmentId(2))));
        ix.forget(SegmentId(2));
        assert_eq!(ix.reclaim(None, &eager), None, "1's length is not known yet");
        assert_eq!(ix.unmeasured(Some(SegmentId(3))), Some(SegmentId(1)));
        ix.segments.get_mut(&SegmentId(1)).unwrap().len = Some(1000);
        assert_eq!(ix.unmeasured(Some(SegmentId(3))), None);
        assert_eq!(ix.reclaim(None, &never), None, "3 still guards 1, and 1 is not compacted");
        let compact = ix.reclaim(None, &eager);
        assert_eq!(
            compact,
            Some(Reclaim::Compact(SegmentId(1), vec![("other".to_owned(), run(0, 1, 1))]))
        );
        assert!(ix.delete("other", SegmentId(3)));
        assert_eq!(ix.reclaim(None, &never), Some(Reclaim::Remove(SegmentId(1))));
        ix.forget(SegmentId(1));
        assert_eq!(ix.reclaim(None, &never), Some(Reclaim::Remove(SegmentId(3))));
    }

    #[test]
    fn a_segment_is_compacted_only_when_that_frees_more_than_it_writes() {
        // Compaction copied live segments back and forth for ever when it judged a segment by its
        // live bytes against the segment size: a sealed segment ends short of that size, so one
        // wholly live could qualify, and its copy in turn.
        let mut ix = Index::default();
        ix.add_segment(SegmentId(1));
        for first in 0..3 {
            let b = BatchLoc { first, count: 1, len: 1000, seg: SegmentId(1), offset: 0 };
            ix.push("s", b, 0, None, None).unwrap();
        }
        let policy = Compaction { dead_at_least: Some(40), chunk: 1 << 16 };
        // One chunk: one group header, and perhaps one segment header.
        assert_eq!(policy.overhead(3, 3000), 56);
        // A segment header and three group headers: 104 dead bytes, more than a copy writes.
        ix.segments.get_mut(&SegmentId(1)).unwrap().len = Some(3104);
        assert!(matches!(ix.reclaim(Some(SegmentId(2)), &policy), Some(Reclaim::Compact(..))));
        // Its copy: one segment header and one group header, no more than copying it again writes.
        ix.segments.get_mut(&SegmentId(1)).unwrap().len = Some(3056);
        assert_eq!(ix.reclaim(Some(SegmentId(2)), &policy), None);
        // Small chunks cost a group header each, at most one per batch.
        let small = Compaction { dead_at_least: Some(40), chunk: 10 };
        assert_eq!(small.overhead(3, 3000), 3 * 56);
    }

    #[test]
    fn a_moved_batch_leaves_a_shadow_that_a_later_deletion_guards() {
        let mut ix = Index::default();
        for id in 1..=3 {
            ix.add_segment(SegmentId(id));
        }
        ix.push("s", run(0, 1, 1), 0, None, None).unwrap();
        ix.moved("s", 0, SegmentId(2), 500);
        assert_eq!(ix.sessions["s"].runs[0].seg, SegmentId(2));
        assert_eq!((ix.segments[&SegmentId(1)].live, ix.segments[&SegmentId(2)].live), (0, 1));
        assert!(ix.delete("s", SegmentId(3)));
        let older: Vec<_> = ix.segments[&SegmentId(3)].guards[0].older.iter().copied().collect();
        assert_eq!(older, vec![SegmentId(1), SegmentId(2)]);
    }
}
