//! Rebuilding the index from a scan: each session's batches collected in log order (a deletion
//! frame drops those before it), then sorted and deduplicated (among copies of one batch, which
//! compaction makes, the latest wins) and checked to be dense from seq 0. Opening refuses on a
//! batch that does not fit; verify reports every one.

use std::collections::{BTreeMap, HashMap};

use super::{BatchLoc, Index, SessionLog};
use crate::file::format::heads::BatchHead;
use crate::file::format::layout::SegmentId;

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
pub(crate) struct Built {
    /// The sessions with at least one batch.
    pub sessions: BTreeMap<String, Ordered>,
    /// Every misfit, in the order of the segments and offsets.
    pub misfits: Vec<Misfit>,
    /// The segments, without sessions.
    index: Index,
}

impl Built {
    /// The index, once every session is dense from 0. Otherwise the earliest (in log order) of
    /// the sessions' first misfits.
    pub(crate) fn into_index(self) -> Result<Index, Misfit> {
        let Built { sessions, misfits, mut index } = self;
        if let Some(m) = misfits.into_iter().filter(|m| m.first).min_by_key(|m| (m.seg, m.offset)) {
            return Err(m);
        }
        for (name, ordered) in sessions {
            for run in &ordered.log.runs {
                index.count_live(run, true);
            }
            if !ordered.log.runs.is_empty() {
                // With no misfit, every session's batches run from seq 0 without a gap.
                debug_assert!(ordered.log.is_dense() && ordered.after_gap == 0, "{name}");
                index.sessions.insert(name, ordered.log);
            }
        }
        Ok(index)
    }
}

/// Builds the index from the frames of a scan, in log order.
#[derive(Debug, Default)]
pub(crate) struct IndexBuilder {
    /// Each session's runs since its last deletion, in log order, with what each tells of the
    /// session's head.
    sessions: HashMap<String, Vec<(BatchLoc, BatchHead)>>,
    index: Index,
}

impl IndexBuilder {
    pub(crate) fn add_segment(&mut self, id: SegmentId) {
        self.index.add_segment(id);
    }

    /// Forgets a segment that is dropped whole (its header is torn).
    pub(crate) fn drop_segment(&mut self, id: SegmentId) {
        self.index.segments.remove(&id);
    }

    /// A batch of `session`, and what it tells of the session's head (verify, which keeps no
    /// heads, gives the default).
    pub(crate) fn events(&mut self, session: &str, run: BatchLoc, head: BatchHead) {
        match self.sessions.get_mut(session) {
            Some(runs) => runs.push((run, head)),
            None => {
                self.sessions.insert(session.to_owned(), vec![(run, head)]);
            }
        }
    }

    /// The session's last batch so far, in log order.
    pub(crate) fn last(&self, session: &str) -> Option<&BatchLoc> {
        self.sessions.get(session).and_then(|runs| runs.last()).map(|(run, _)| run)
    }

    pub(crate) fn delete(&mut self, session: &str, at: SegmentId) {
        if let Some(runs) = self.sessions.remove(session) {
            self.index.guard(at, runs.iter().map(|(r, _)| r.seg));
        }
    }

    /// Puts each session's runs in order (a stable sort: among copies of one batch, the latest
    /// stays last and wins) and checks that they continue each other from seq 0.
    pub(crate) fn finish(self) -> Built {
        let IndexBuilder { sessions, index } = self;
        let mut out = Built { index, ..Built::default() };
        for (name, mut runs) in sessions {
            runs.sort_by_key(|(r, _)| r.first);
            let mut ordered = Ordered::default();
            let mut kept: Vec<(BatchLoc, BatchHead)> = Vec::with_capacity(runs.len());
            for (run, head) in runs {
                match kept.last_mut() {
                    Some((last, _)) if last.first == run.first && last.count == run.count => {
                        ordered.log.shadows.insert(last.seg);
                        *last = run;
                    }
                    _ => kept.push((run, head)),
                }
            }
            let mut tail = 0u64;
            let mut gap = false;
            let mut first = true;
            for (run, head) in kept {
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
                    head.apply(&mut ordered.log.head);
                    ordered.log.last_at = head.last_at.get();
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

    fn run(first: u64, count: u32, seg: u64) -> BatchLoc {
        BatchLoc { first, count, len: 100, seg: SegmentId(seg), offset: 32 + first }
    }

    #[test]
    fn replay_sorts_copies_keeps_the_latest_and_forgives_gaps_a_deletion_covers() {
        let mut r = IndexBuilder::default();
        for id in 1..=4 {
            r.add_segment(SegmentId(id));
        }
        // "s": 0..2 in 1, 2..3 in 2, then a copy of 0..2 in 4.
        r.events("s", run(0, 2, 1), BatchHead::default());
        r.events("s", run(2, 1, 2), BatchHead::default());
        r.events("s", run(0, 2, 4), BatchHead::default());
        // "d": a gap (its middle was purged), then deleted.
        r.events("d", run(0, 1, 1), BatchHead::default());
        r.events("d", run(5, 1, 3), BatchHead::default());
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
        let mut r = IndexBuilder::default();
        r.add_segment(SegmentId(1));
        r.events("a", run(0, 1, 1), BatchHead::default());
        r.events("a", run(3, 1, 1), BatchHead::default());
        r.events("b", run(1, 1, 1), BatchHead::default());
        let m = r.finish().into_index().unwrap_err();
        assert_eq!((m.seg, m.offset), (SegmentId(1), 33), "{m:?}");
        assert!(m.reason().contains("session b"), "{m:?}");
    }
}
