//! Rebuilding the index from a scan: each session's batches collected in log order (a deletion
//! frame drops those before it), then sorted and deduplicated (among copies of one batch, which
//! compaction makes, the latest wins) and checked to be dense from seq 0. Opening refuses on a
//! batch that does not fit; verify reports every one.

pub(crate) use super::names::SessionNo;
use super::names::{Numbers, by_name};
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
    /// The sessions with at least one batch, in order of their names.
    // Invariant: sorted by name, each name once.
    sessions: Vec<(String, Ordered)>,
    /// Every misfit, in the order of the segments and offsets.
    pub misfits: Vec<Misfit>,
    /// The segments, without sessions.
    index: Index,
}

impl Built {
    /// The names of the sessions with at least one batch, in order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.sessions.iter().map(|(name, _)| name.as_str())
    }

    /// The session's batches, if it has any.
    pub(crate) fn session(&self, name: &str) -> Option<&Ordered> {
        let k = self.sessions.binary_search_by(|(n, _)| n.as_str().cmp(name)).ok()?;
        self.sessions.get(k).map(|(_, ordered)| ordered)
    }

    /// The index, once every session is dense from 0. Otherwise the earliest (in log order) of
    /// the sessions' first misfits.
    pub(crate) fn into_index(self) -> Result<Index, Misfit> {
        let Built { sessions, misfits, mut index } = self;
        if let Some(m) = misfits.into_iter().filter(|m| m.first).min_by_key(|m| (m.seg, m.offset)) {
            return Err(m);
        }
        // Each segment's live batches and bytes, counted in a list beside the segments' ids
        // (a session's batches mostly lie in one segment: the last one found is tried first).
        let ids: Vec<SegmentId> = index.segments.keys().copied().collect();
        let mut live = vec![(0u64, 0u64); ids.len()];
        let mut near = 0;
        let mut logs = Vec::with_capacity(sessions.len());
        for (name, ordered) in sessions {
            for run in &ordered.log.runs {
                if ids.get(near) != Some(&run.seg) {
                    match ids.binary_search(&run.seg) {
                        Ok(k) => near = k,
                        // A segment dropped whole counts nothing.
                        Err(_) => continue,
                    }
                }
                if let Some((n, bytes)) = live.get_mut(near) {
                    *n += 1;
                    *bytes += u64::from(run.len);
                }
            }
            if !ordered.log.runs.is_empty() {
                // With no misfit, every session's batches run from seq 0 without a gap.
                debug_assert!(ordered.log.is_dense() && ordered.after_gap == 0, "{name}");
                logs.push((name, ordered.log));
            }
        }
        for ((_, seg), (n, bytes)) in index.segments.iter_mut().zip(live) {
            seg.live += n;
            seg.live_bytes += bytes;
        }
        // In order of their names already: the map is built in one pass.
        debug_assert!(index.sessions.is_empty(), "the builder adds no session to its index");
        index.sessions = logs.into_iter().collect();
        Ok(index)
    }
}

/// Builds the index from the frames of a scan, in log order.
///
/// Each session is a number, its name stored once; its batches go straight into the list the
/// index keeps (a sidecar tells how many a segment holds: `reserve`), and the few batches that
/// tell of the session's head into one list for all sessions. `finish` sorts a session's list
/// only when it is out of order (compaction's copies), and moves it into the index.
#[derive(Debug, Default)]
pub(crate) struct IndexBuilder {
    /// Each session's number, by name.
    numbers: Numbers,
    /// Each session's batches and what they tell, by number.
    sessions: Vec<Collected>,
    /// The batches that change their session's head, in log order (most change nothing).
    heads: Vec<HeadAt>,
    index: Index,
}

/// One session's batches since its last deletion.
#[derive(Debug, Default)]
struct Collected {
    /// In log order.
    runs: Vec<BatchLoc>,
    /// The highest first sequence number among `runs` (the first met among copies), and when
    /// that batch's last event was appended: the session's `last_at` once its batches are dense.
    top: Option<(u64, u64)>,
    /// How many deletion frames of the session were met: a head recorded before the last one is
    /// dropped.
    deletions: u64,
    /// The seq of the newest snapshot among `runs` (copies of a batch tell the same; a deletion
    /// forgets it with the runs).
    snapshot: Option<u64>,
    /// The furthest trim among `runs`: the batches ending at or before it were dropped (a
    /// deletion forgets it with the runs).
    trim: Option<u64>,
}

/// A batch that tells of its session's head.
#[derive(Debug)]
struct HeadAt {
    session: SessionNo,
    /// Its session's deletions before it.
    deletions: u64,
    first: u64,
    head: BatchHead,
}

impl IndexBuilder {
    pub(crate) fn add_segment(&mut self, id: SegmentId) {
        self.index.add_segment(id);
    }

    /// Forgets a segment that is dropped whole (its header is torn).
    pub(crate) fn drop_segment(&mut self, id: SegmentId) {
        self.index.segments.remove(&id);
    }

    /// The number of `session`, given it at its first call.
    pub(crate) fn session(&mut self, session: &str) -> SessionNo {
        let no = self.numbers.number(session);
        if self.sessions.len() <= no.0 as usize {
            self.sessions.push(Collected::default());
        }
        debug_assert_eq!(self.sessions.len(), self.numbers.len());
        no
    }

    /// Makes room for `n` more sessions (a sidecar tells how many a segment holds; some may be
    /// numbered already), so that the map of names grows in few steps.
    pub(crate) fn reserve_sessions(&mut self, n: usize) {
        self.numbers.reserve(n);
        self.sessions.reserve(n);
    }

    /// Makes room for `n` more batches of `session` (a sidecar tells how many a segment holds):
    /// exactly for a session met first, as most are in one segment or two; otherwise as a list
    /// grows (room for `n` exactly, segment after segment, would copy a session that spans
    /// thousands of segments at each of them).
    pub(crate) fn reserve(&mut self, session: SessionNo, n: usize) {
        if let Some(c) = self.sessions.get_mut(session.0 as usize) {
            if c.runs.is_empty() {
                c.runs.reserve_exact(n);
            } else {
                c.runs.reserve(n);
            }
        }
    }

    /// A batch of `session`, and what it tells of the session's head (verify, which keeps no
    /// heads, gives the default).
    pub(crate) fn events(&mut self, session: &str, run: BatchLoc, head: BatchHead) {
        let no = self.session(session);
        self.events_of(no, run, head);
    }

    /// [`events`](Self::events) of a session already numbered.
    pub(crate) fn events_of(&mut self, session: SessionNo, run: BatchLoc, head: BatchHead) {
        let Some(c) = self.sessions.get_mut(session.0 as usize) else {
            debug_assert!(false, "session {session:?} was numbered by this builder");
            return;
        };
        c.runs.push(run);
        if c.top.is_none_or(|(first, _)| run.first > first) {
            c.top = Some((run.first, head.last_at.get()));
        }
        // A damaged journal may claim a place past the batch: only one inside it counts.
        let snapshot = head.snapshot.map(|k| run.first.saturating_add(u64::from(k)));
        if let Some(seq) = snapshot.filter(|s| *s < run.end())
            && c.snapshot.is_none_or(|newest| seq > newest)
        {
            c.snapshot = Some(seq);
        }
        if let Some(before) = head.trim().filter(|b| *b < run.first)
            && c.trim.is_none_or(|t| before > t)
        {
            c.trim = Some(before);
        }
        if head.events.is_some() {
            let deletions = c.deletions;
            self.heads.push(HeadAt { session, deletions, first: run.first, head });
        }
    }

    /// The session's last batch so far, in log order.
    pub(crate) fn last(&self, session: &str) -> Option<&BatchLoc> {
        let no = self.numbers.get(session)?;
        self.sessions.get(no.0 as usize)?.runs.last()
    }

    pub(crate) fn delete(&mut self, session: &str, at: SegmentId) {
        if let Some(no) = self.numbers.get(session) {
            self.delete_of(no, at);
        }
    }

    /// [`delete`](Self::delete) of a session already numbered.
    pub(crate) fn delete_of(&mut self, session: SessionNo, at: SegmentId) {
        let Some(c) = self.sessions.get_mut(session.0 as usize) else { return };
        if c.runs.is_empty() {
            return;
        }
        let runs = std::mem::take(&mut c.runs);
        c.top = None;
        c.snapshot = None;
        c.trim = None;
        c.deletions += 1;
        self.index.guard(at, runs.iter().map(|r| r.seg));
    }

    /// Puts each session's runs in order (a stable sort: among copies of one batch, the latest
    /// stays last and wins) and checks that they continue each other from seq 0.
    pub(crate) fn finish(self) -> Built {
        let IndexBuilder { numbers, sessions: collected, mut heads, index } = self;
        let names = numbers.into_names();
        // Each session's heads together, in sequence order (stable: among copies of a batch,
        // the first met).
        heads.sort_by_key(|h| (h.session, h.first));
        let mut heads = heads.iter().peekable();
        let mut misfits = Vec::new();
        let mut sessions = Vec::with_capacity(collected.len());
        for ((k, name), c) in names.into_iter().enumerate().zip(collected) {
            let no = SessionNo(k as u32);
            let mine = std::iter::from_fn(|| heads.next_if(|h| h.session <= no))
                .filter(|h| h.session == no && h.deletions == c.deletions);
            if c.runs.is_empty() {
                mine.for_each(drop);
                continue;
            }
            let mut ordered = Ordered::default();
            let mut runs = c.runs;
            if !runs.is_sorted_by_key(|r| r.first) {
                runs.sort_by_key(|r| r.first);
            }
            let shadows = &mut ordered.log.shadows;
            runs.dedup_by(|later, kept| {
                let copy = later.first == kept.first && later.count == kept.count;
                if copy {
                    shadows.insert(kept.seg);
                    *kept = *later;
                }
                copy
            });
            // A trimmed session: the batches before its trim are stale frames, its log starts
            // at the batch holding the trim's `before`, and its head is unknown until a run
            // begins or ends in what is kept (the run the trim cut the start of is not there).
            let start = match c.trim {
                Some(before) => {
                    let cut = runs.partition_point(|r| r.end() <= before);
                    shadows.extend(runs.drain(..cut).map(|r| r.seg));
                    ordered.log.head.run = crate::RunState::Unknown;
                    runs.first().map_or(before, |r| r.first.min(before))
                }
                None => 0,
            };
            let kept_from = runs.first().map_or(0, |r| r.first);
            let mut tail = start;
            let dense = runs.iter().all(|r| {
                let fits = r.first == tail;
                tail = r.end();
                fits
            });
            if dense {
                let mut applied = None;
                for h in mine.filter(|h| h.first >= kept_from) {
                    // A copy of a batch tells the same.
                    if applied != Some(h.first) {
                        h.head.apply(&mut ordered.log.head);
                        applied = Some(h.first);
                    }
                }
                ordered.log.last_at = c.top.map_or(0, |(_, at)| at);
                // Every batch collected is kept: the newest snapshot among them lies before
                // the tail.
                debug_assert!(c.snapshot.is_none_or(|s| s < tail), "{name}: {:?}", c.snapshot);
                ordered.log.snapshot = c.snapshot;
                ordered.log.runs = runs;
            } else {
                // Misfits make the index refuse: its head is not worked out.
                mine.for_each(drop);
                ordered.log.runs = misfit(&name, start, runs, &mut ordered.after_gap, &mut misfits);
                // Only a snapshot the runs kept before the first gap hold.
                let kept = ordered.log.tail();
                ordered.log.snapshot = c.snapshot.filter(|s| *s < kept);
            }
            let log = &mut ordered.log;
            if !log.shadows.is_empty() {
                log.shadows.retain(|s| log.runs.iter().all(|r| r.seg != *s));
            }
            sessions.push((name, ordered));
        }
        misfits.sort_by_key(|m| (m.seg, m.offset));
        Built { sessions: by_name(sessions), misfits, index }
    }
}

/// The runs of session `name` (sorted, without copies) that continue each other from `start`
/// (0, or where a trim left the log), up to the first gap; the events after it are counted in
/// `after_gap`, and each run that does not fit is added to `misfits`.
fn misfit(
    name: &str,
    start: u64,
    runs: Vec<BatchLoc>,
    after_gap: &mut u64,
    misfits: &mut Vec<Misfit>,
) -> Vec<BatchLoc> {
    let mut kept = Vec::with_capacity(runs.len());
    let mut tail = start;
    let mut gap = false;
    let mut first = true;
    for run in runs {
        let misfit = |kind| Misfit {
            session: name.to_owned(),
            seg: run.seg,
            offset: run.offset,
            len: run.len,
            kind,
            first,
        };
        if run.first < tail {
            let kind = MisfitKind::Overlap { first: run.first, count: run.count, tail };
            misfits.push(misfit(kind));
            first = false;
            continue;
        }
        if run.first > tail {
            misfits.push(misfit(MisfitKind::Gap { from: tail, to: run.first }));
            first = false;
            gap = true;
        }
        if gap {
            *after_gap = after_gap.saturating_add(u64::from(run.count));
        } else {
            kept.push(run);
        }
        tail = run.end();
    }
    kept
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
    fn replay_keeps_the_newest_snapshot_whatever_the_order_of_copies_and_a_deletion_forgets_it() {
        let snap = |k: u32| BatchHead { snapshot: Some(k), ..BatchHead::default() };
        let mut r = IndexBuilder::default();
        for id in 1..=3 {
            r.add_segment(SegmentId(id));
        }
        // "s": a snapshot at seq 1, one at seq 4, then a copy of the first batch (later in the
        // log, lower in seq): the newest stays 4.
        r.events("s", run(0, 2, 1), snap(1));
        r.events("s", run(2, 3, 2), snap(2));
        r.events("s", run(5, 1, 2), BatchHead::default());
        r.events("s", run(0, 2, 3), snap(1));
        // "d": a snapshot, then deleted and written again without one.
        r.events("d", run(0, 1, 1), snap(0));
        r.delete("d", SegmentId(2));
        r.events("d", run(0, 1, 2), BatchHead::default());
        // "x": a place past its batch (damage) counts for nothing.
        r.events("x", run(0, 2, 1), snap(7));
        let ix = r.finish().into_index().unwrap();
        assert_eq!(ix.sessions["s"].snapshot, Some(4));
        assert_eq!(ix.sessions["d"].snapshot, None);
        assert_eq!(ix.sessions["x"].snapshot, None);
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

    #[test]
    fn sessions_come_out_in_order_of_their_names_whatever_they_share_and_however_they_tie() {
        // Names that share a prefix, and names alike in the 8 bytes after it (the sort's key),
        // one a prefix of another.
        let names = [
            "s-0000000000b",
            "s-0000000000a",
            "s-1",
            "s-00000000",
            "s-0000000",
            "s-",
            "s-00000000\u{0}",
        ];
        let mut r = IndexBuilder::default();
        r.add_segment(SegmentId(1));
        for (k, name) in names.iter().enumerate() {
            r.events(name, run(0, 1, 1), BatchHead::default());
            assert_eq!(r.last(name).map(|b| b.offset), Some(32), "{k}");
        }
        let built = r.finish();
        let mut sorted = names.to_vec();
        sorted.sort_unstable();
        assert_eq!(built.names().collect::<Vec<_>>(), sorted);
        assert!(built.session("s-1").is_some() && built.session("s-2").is_none());
        assert_eq!(built.into_index().unwrap().sessions.keys().collect::<Vec<_>>(), sorted);
    }

    #[test]
    fn a_deletion_drops_the_heads_before_it_and_the_latest_batch_gives_the_last_time() {
        use stepjournal_codec::UnixMillis;

        use crate::file::format::heads::HeadEvent;
        let started = |run: &str, at: u64| BatchHead {
            last_at: UnixMillis(at),
            events: Some(
                vec![HeadEvent::Event(stepjournal_codec::Event::RunStarted(
                    stepjournal_codec::RunStarted {
                        run: stepjournal_codec::RunId::new(run),
                        entry: stepjournal_codec::Entry::Wake,
                        by: None,
                    },
                ))]
                .into_boxed_slice(),
            ),
            snapshot: None,
        };
        let plain = |at: u64| BatchHead { last_at: UnixMillis(at), events: None, snapshot: None };
        let mut r = IndexBuilder::default();
        r.add_segment(SegmentId(1));
        r.add_segment(SegmentId(2));
        r.events("s", run(0, 1, 1), started("old", 5));
        r.delete("s", SegmentId(2));
        r.events("s", run(1, 1, 2), plain(30));
        r.events("s", run(0, 1, 2), started("new", 20));
        r.events("t", run(0, 1, 1), started("t", 7));
        r.delete("t", SegmentId(2));
        let ix = r.finish().into_index().unwrap();
        let s = &ix.sessions["s"];
        assert_eq!(s.runs.iter().map(|r| r.first).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(s.last_at, 30);
        assert!(
            matches!(&s.head.run, crate::RunState::Open { run } if run.as_str() == "new"),
            "{:?}",
            s.head
        );
        assert!(!ix.sessions.contains_key("t"));
    }
}
