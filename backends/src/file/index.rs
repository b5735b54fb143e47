//! The in-memory index: where each session's batches are, and which segments still matter.
//!
//! Per session it keeps one [`Run`] per batch (not an entry per event). Per segment it keeps how
//! many batches (and bytes) there are still live, and the deletion frames it holds that must
//! stay on disk.
//!
//! A session's frames appear in the log in order, except for copies compaction made of live
//! frames: those come later than frames with higher sequence numbers, and after a crash during
//! compaction the original and the copy may both be on disk. So on open ([`Replay`]) a session's
//! runs are collected, sorted and deduplicated (the latest copy wins), and checked to be dense at
//! the end; a deletion frame drops every run collected for its session so far.

use std::collections::{BTreeMap, BTreeSet, HashMap};
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
    /// The sequence number after the batch (saturating: a damaged journal may claim a batch
    /// past the last sequence number).
    pub(crate) fn end(&self) -> u64 {
        self.first.saturating_add(u64::from(self.count))
    }
}

/// A session's batches.
#[derive(Debug, Default)]
pub(crate) struct SessionLog {
    // Invariant: dense from 0: runs[0].first == 0, runs[i + 1].first == runs[i].end(); never empty
    // while the session is in the index.
    pub runs: Vec<Run>,
    /// Segments that still hold stale copies of this session's frames (left by compaction).
    pub shadows: BTreeSet<SegmentId>,
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
    /// Events frames here that are the current home of a live batch.
    pub live: u64,
    /// Their bytes.
    pub live_bytes: u64,
    /// Deletion frames here that must stay.
    pub guards: Vec<Guard>,
}

impl SegmentInfo {
    fn new(file: Arc<dyn IoFile>) -> Self {
        SegmentInfo { file, live: 0, live_bytes: 0, guards: Vec::new() }
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
    Compact(SegmentId, Vec<(String, Run)>),
}

impl Index {
    pub(crate) fn tail(&self, session: &str) -> u64 {
        self.sessions.get(session).map_or(0, SessionLog::tail)
    }

    pub(crate) fn add_segment(&mut self, id: SegmentId, file: Arc<dyn IoFile>) {
        self.segments.insert(id, SegmentInfo::new(file));
    }

    fn count_live(&mut self, run: &Run, add: bool) {
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
                let log = SessionLog { runs: vec![run], shadows: BTreeSet::new() };
                self.sessions.insert(session.to_owned(), log);
            }
        }
        self.count_live(&run, true);
        Ok(())
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
    fn guard(&mut self, at: SegmentId, segs: impl Iterator<Item = SegmentId>) {
        let older: BTreeSet<SegmentId> =
            segs.filter(|s| *s != at && self.segments.contains_key(s)).collect();
        if let (false, Some(seg)) = (older.is_empty(), self.segments.get_mut(&at)) {
            seg.guards.push(Guard { older });
        }
    }

    /// The next thing to do to free space, if any: a segment other than `active` with nothing
    /// needed in it, or else the oldest sealed segment whose live batches fill at most a quarter
    /// of `segment_size` and that holds no deletion frame that must stay.
    pub(crate) fn reclaim(&self, active: Option<SegmentId>, segment_size: u64) -> Option<Reclaim> {
        let sealed = || self.segments.iter().filter(move |(id, _)| Some(**id) != active);
        if let Some((id, _)) = sealed().find(|(_, s)| s.live == 0 && s.guards.is_empty()) {
            return Some(Reclaim::Remove(*id));
        }
        let (id, _) = sealed()
            .find(|(_, s)| s.guards.is_empty() && s.live_bytes.saturating_mul(4) <= segment_size)?;
        let mut live = Vec::new();
        for (name, log) in &self.sessions {
            live.extend(log.runs.iter().filter(|r| r.seg == *id).map(|r| (name.clone(), *r)));
        }
        Some(Reclaim::Compact(*id, live))
    }

    /// A batch of `session` copied to a new place: the copy is its home from now on, and the old
    /// segment holds a stale copy until it is removed.
    pub(crate) fn moved(&mut self, session: &str, first: u64, seg: SegmentId, offset: u64) {
        let Some(log) = self.sessions.get_mut(session) else { return };
        let i = log.runs.partition_point(|r| r.first < first);
        let Some(run) = log.runs.get_mut(i).filter(|r| r.first == first) else { return };
        let old = *run;
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
        self.segments.remove(&id);
        for seg in self.segments.values_mut() {
            for g in &mut seg.guards {
                g.older.remove(&id);
            }
            seg.guards.retain(|g| !g.older.is_empty());
        }
        for log in self.sessions.values_mut() {
            log.shadows.remove(&id);
        }
    }
}

/// How a batch does not fit its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MisfitKind {
    /// The session's events before it end at `from`; it starts at `to`.
    Gap { from: u64, to: u64 },
    /// It claims sequence numbers the session's events before it already hold (up to `tail`).
    Overlap { first: u64, count: u32, tail: u64 },
}

/// A batch that does not fit its session, found at the end of a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Misfit {
    pub session: String,
    /// The frame that does not fit.
    pub seg: SegmentId,
    pub offset: u64,
    pub len: u32,
    pub kind: MisfitKind,
    /// Whether it is its session's first misfit (in sequence order).
    pub first: bool,
}

impl Misfit {
    /// What is wrong, in words.
    pub(crate) fn reason(&self) -> String {
        let name = &self.session;
        match self.kind {
            MisfitKind::Gap { from, to } => format!(
                "a batch of session {name} starts at seq {to}, but the session's events before \
                 it end at seq {from}"
            ),
            MisfitKind::Overlap { first, count, tail } => format!(
                "a batch of {count} events of session {name} from seq {first} overlaps the \
                 session's events up to seq {tail}"
            ),
        }
    }
}

/// A session's batches as a replay ordered them.
#[derive(Debug, Default)]
pub(crate) struct Ordered {
    /// Dense from seq 0 up to the first gap (batches that overlap are left out).
    pub log: SessionLog,
    /// Events in the batches after the first gap.
    pub after_gap: u64,
}

/// What a replay found: each session's batches in order, and every batch that does not fit.
#[derive(Debug, Default)]
pub(crate) struct Replayed {
    /// The sessions with at least one batch.
    pub sessions: BTreeMap<String, Ordered>,
    /// Every misfit, in the order of the segments and offsets.
    pub misfits: Vec<Misfit>,
    /// The segments, without sessions.
    index: Index,
}

impl Replayed {
    /// The segments replayed.
    pub(crate) fn segments(&self) -> &BTreeMap<SegmentId, SegmentInfo> {
        &self.index.segments
    }

    /// The index, once every session is dense from 0. Otherwise the earliest (in log order) of
    /// the sessions' first misfits.
    pub(crate) fn into_index(self) -> Result<Index, Misfit> {
        let Replayed { sessions, misfits, mut index } = self;
        if let Some(m) = misfits.into_iter().filter(|m| m.first).min_by_key(|m| (m.seg, m.offset)) {
            return Err(m);
        }
        for (name, ordered) in sessions {
            for run in &ordered.log.runs {
                index.count_live(run, true);
            }
            if !ordered.log.runs.is_empty() {
                index.sessions.insert(name, ordered.log);
            }
        }
        Ok(index)
    }
}

/// Builds the index from the frames of a scan, in log order.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// Each session's runs since its last deletion, in log order.
    sessions: HashMap<String, Vec<Run>>,
    index: Index,
}

impl Replay {
    pub(crate) fn add_segment(&mut self, id: SegmentId, file: Arc<dyn IoFile>) {
        self.index.add_segment(id, file);
    }

    /// Forgets a segment that is dropped whole (its header is torn).
    pub(crate) fn drop_segment(&mut self, id: SegmentId) {
        self.index.segments.remove(&id);
    }

    pub(crate) fn events(&mut self, session: &str, run: Run) {
        match self.sessions.get_mut(session) {
            Some(runs) => runs.push(run),
            None => {
                self.sessions.insert(session.to_owned(), vec![run]);
            }
        }
    }

    /// The session's last batch so far, in log order.
    pub(crate) fn last(&self, session: &str) -> Option<&Run> {
        self.sessions.get(session).and_then(|runs| runs.last())
    }

    pub(crate) fn delete(&mut self, session: &str, at: SegmentId) {
        if let Some(runs) = self.sessions.remove(session) {
            self.index.guard(at, runs.iter().map(|r| r.seg));
        }
    }

    /// Puts each session's runs in order (a stable sort: among copies of one batch, the latest
    /// stays last and wins) and checks that they continue each other from seq 0.
    pub(crate) fn finish(self) -> Replayed {
        let Replay { sessions, index } = self;
        let mut out = Replayed { index, ..Replayed::default() };
        for (name, mut runs) in sessions {
            runs.sort_by_key(|r| r.first);
            let mut ordered = Ordered::default();
            let mut kept: Vec<Run> = Vec::with_capacity(runs.len());
            for run in runs {
                match kept.last_mut() {
                    Some(last) if last.first == run.first && last.count == run.count => {
                        ordered.log.shadows.insert(last.seg);
                        *last = run;
                    }
                    _ => kept.push(run),
                }
            }
            let mut tail = 0u64;
            let mut gap = false;
            let mut first = true;
            for run in kept {
                let misfit = |kind| Misfit {
                    session: name.clone(),
                    seg: run.seg,
                    offset: run.offset,
                    len: run.len,
                    kind,
                    first,
                };
                if run.first < tail {
                    let kind = MisfitKind::Overlap { first: run.first, count: run.count, tail };
                    out.misfits.push(misfit(kind));
                    first = false;
                    continue;
                }
                if run.first > tail {
                    out.misfits.push(misfit(MisfitKind::Gap { from: tail, to: run.first }));
                    first = false;
                    gap = true;
                }
                if gap {
                    ordered.after_gap = ordered.after_gap.saturating_add(u64::from(run.count));
                } else {
                    ordered.log.runs.push(run);
                }
                tail = run.end();
            }
            let log = &mut ordered.log;
            log.shadows.retain(|s| log.runs.iter().all(|r| r.seg != *s));
            out.sessions.insert(name, ordered);
        }
        out.misfits.sort_by_key(|m| (m.seg, m.offset));
        out
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
        Run { first, count, len: 100, seg: SegmentId(seg), offset: 32 + first }
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
        assert_eq!(ix.reclaim(Some(SegmentId(3)), 1 << 20), Some(Reclaim::Remove(SegmentId(2))));
        ix.forget(SegmentId(2));
        assert_eq!(ix.reclaim(None, 0), None, "3 still guards 1, and 1 is not worth compacting");
        let compact = ix.reclaim(None, 1 << 20);
        assert_eq!(
            compact,
            Some(Reclaim::Compact(SegmentId(1), vec![("other".to_owned(), run(0, 1, 1))]))
        );
        assert!(ix.delete("other", SegmentId(3)));
        assert_eq!(ix.reclaim(None, 0), Some(Reclaim::Remove(SegmentId(1))));
        ix.forget(SegmentId(1));
        assert_eq!(ix.reclaim(None, 0), Some(Reclaim::Remove(SegmentId(3))));
    }

    #[test]
    fn a_moved_batch_leaves_a_shadow_that_a_later_deletion_guards() {
        let mut ix = Index::default();
        for id in 1..=3 {
            ix.add_segment(SegmentId(id), file());
        }
        ix.push("s", run(0, 1, 1)).unwrap();
        ix.moved("s", 0, SegmentId(2), 500);
        assert_eq!(ix.sessions["s"].runs[0].seg, SegmentId(2));
        assert_eq!((ix.segments[&SegmentId(1)].live, ix.segments[&SegmentId(2)].live), (0, 1));
        assert!(ix.delete("s", SegmentId(3)));
        let older: Vec<_> = ix.segments[&SegmentId(3)].guards[0].older.iter().copied().collect();
        assert_eq!(older, vec![SegmentId(1), SegmentId(2)]);
    }

    #[test]
    fn replay_sorts_copies_keeps_the_latest_and_forgives_gaps_a_deletion_covers() {
        let mut r = Replay::default();
        for id in 1..=4 {
            r.add_segment(SegmentId(id), file());
        }
        // "s": 0..2 in 1, 2..3 in 2, then a copy of 0..2 in 4.
        r.events("s", run(0, 2, 1));
        r.events("s", run(2, 1, 2));
        r.events("s", run(0, 2, 4));
        // "d": a gap (its middle was purged), then deleted.
        r.events("d", run(0, 1, 1));
        r.events("d", run(5, 1, 3));
        r.delete("d", SegmentId(3));
        let ix = r.finish().into_index().unwrap();
        let s = &ix.sessions["s"];
        assert_eq!(
            s.runs.iter().map(|r| (r.first, r.seg.0)).collect::<Vec<_>>(),
            vec![(0, 4), (2, 2)]
        );
        assert!(s.shadows.contains(&SegmentId(1)));
        assert!(!ix.sessions.contains_key("d"));
        assert_eq!(ix.segments[&SegmentId(1)].live, 0);
        assert_eq!(ix.segments[&SegmentId(3)].guards[0].older.iter().next(), Some(&SegmentId(1)));
    }

    #[test]
    fn replay_reports_the_earliest_gap_no_deletion_covers() {
        let mut r = Replay::default();
        r.add_segment(SegmentId(1), file());
        r.events("a", run(0, 1, 1));
        r.events("a", run(3, 1, 1));
        r.events("b", run(1, 1, 1));
        let m = r.finish().into_index().unwrap_err();
        assert_eq!((m.seg, m.offset), (SegmentId(1), 33), "{m:?}");
        assert!(m.reason().contains("session b"), "{m:?}");
    }
}
