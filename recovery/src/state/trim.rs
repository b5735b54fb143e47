//! Trimmed logs: a session whose events before a kept `snapshot` were dropped (`trimmed`,
//! format version 5). Its log starts after seq 0, at the kept snapshot or, on a store that drops
//! whole batches, a few events before it; the state before that snapshot is what the snapshot
//! holds. A fold of such a log starts from its first intact snapshot ([`SessionState::of_log`]):
//! the same state a fold from that snapshot gives, which the snapshots' property already holds
//! equal to the fold of the whole log as it was.

use stepjournal_codec::{Entry, Event, Record, Seq, Trimmed};

use super::SessionState;

/// A `trimmed` the log holds: where its log starts, and the turns it left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrimRecord {
    /// Where the `trimmed` event is.
    pub seq: Seq,
    /// The first seq kept (a `snapshot`).
    pub before: Seq,
    /// The turns dropped by every trim of the session so far.
    pub turns: u64,
}

/// Why a log cannot be folded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the log starts at seq {first} (its earlier events were trimmed) and holds no intact \
     snapshot to start a fold from{why}"
)]
pub struct NoStart {
    /// Where the log starts.
    pub first: Seq,
    /// What was wrong with the snapshots it holds, if any (", the one at seq 12: ...").
    pub why: String,
}

impl SessionState {
    /// A `trimmed` at `seq`.
    pub(super) fn on_trimmed(&mut self, seq: Seq, trimmed: &Trimmed) {
        self.trimmed =
            Some(Box::new(TrimRecord { seq, before: trimmed.before, turns: trimmed.turns }));
    }

    /// The last `trimmed` folded: the session's log starts at (or just before) its `before`.
    /// A state folded from a snapshot after it does not see it.
    pub fn trimmed(&self) -> Option<&TrimRecord> {
        self.trimmed.as_deref()
    }

    /// Where a fold of `records` (a log as a store reads it, oldest first, dense) starts: the
    /// empty state and 0 when they start at seq 0; when they start later (a trimmed log), the
    /// state folded from their first intact snapshot and the number of records it takes in
    /// (those before it, and itself). Fold the records after those into it.
    pub fn start_of(records: &[Record]) -> Result<(usize, SessionState), NoStart> {
        let Some(first) = records.first().map(|r| r.seq) else {
            return Ok((0, SessionState::default()));
        };
        if first == Seq(0) {
            return Ok((0, SessionState::default()));
        }
        let mut why = String::new();
        for (i, r) in records.iter().enumerate() {
            if let Event::Snapshot(snapshot) = &r.event {
                match SessionState::from_snapshot(r.seq, snapshot) {
                    Ok(state) => return Ok((i + 1, state)),
                    Err(flaw) => why.push_str(&format!(", the one at seq {}: {flaw}", r.seq)),
                }
            }
        }
        Err(NoStart { first, why })
    }

    /// The fold of a log as a store reads it: of every event when it starts at seq 0, from its
    /// first intact snapshot when it was trimmed ([`start_of`](Self::start_of)).
    pub fn of_log(records: &[Record]) -> Result<SessionState, NoStart> {
        let (taken, mut state) = SessionState::start_of(records)?;
        for r in records.get(taken..).unwrap_or_default() {
            state.apply(&r.event);
        }
        Ok(state)
    }

    /// [`of_log`](Self::of_log) of records it owns, their text moved in.
    pub fn of_log_owned(records: Vec<Record>) -> Result<SessionState, NoStart> {
        let (taken, mut state) = SessionState::start_of(&records)?;
        for r in records.into_iter().skip(taken) {
            state.apply_owned(r.event);
        }
        Ok(state)
    }
}

/// Where a trim of the log `records` (as the store keeps it, oldest first) keeping the last
/// `keep_turns` turns cuts it, and the turns the `trimmed` event records (those the log's last
/// trim recorded, and those begun in the part dropped now); `Err` says why nothing can go.
pub fn trim_point(records: &[Record], keep_turns: usize) -> Result<(Seq, u64), String> {
    let (taken, _) = SessionState::start_of(records).map_err(|e| e.to_string())?;
    // Where the fold of the log starts now: a trim must drop more than that.
    let base = match taken {
        0 => Seq(0),
        k => records.get(k - 1).map_or(Seq(0), |r| r.seq),
    };
    let intact: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| match &r.event {
            Event::Snapshot(s) => SessionState::from_snapshot(r.seq, s).is_ok(),
            _ => false,
        })
        .map(|(i, _)| i)
        .collect();
    let Some((_newest, older)) = intact.split_last() else {
        return Err("the log holds no intact snapshot".into());
    };
    let turn_starts: Vec<Seq> = records
        .iter()
        .filter(|r| {
            matches!(&r.event, Event::RunStarted(s) if matches!(s.entry, Entry::NewTurn { .. }))
        })
        .map(|r| r.seq)
        .collect();
    let bound = match keep_turns {
        0 => Seq(u64::MAX),
        k if k > turn_starts.len() => {
            return Err(format!(
                "the log holds {} turns and {k} are to be kept whole",
                turn_starts.len()
            ));
        }
        k => turn_starts.get(turn_starts.len() - k).copied().unwrap_or(Seq(0)),
    };
    // A `retry` or a `resume` enters the last commit's checkpoint (or the saved step's, which
    // is later): its `rewound` reaches back to that step's reply, which the kept log must hold.
    let last_commit = records.iter().rev().find_map(|r| match &r.event {
        Event::StepCommit(c) => Some(c.step),
        _ => None,
    });
    let entered = last_commit.and_then(|step| {
        records.iter().rev().find_map(|r| match &r.event {
            Event::ReplyCommitted(reply) if reply.step == step => Some(r.seq),
            _ => None,
        })
    });
    let fits = |i: usize| -> bool {
        let Some(r) = records.get(i) else { return false };
        if r.seq <= base || r.seq > bound || entered.is_some_and(|e| r.seq > e) {
            return false;
        }
        // A fold from it must need nothing before it.
        SessionState::of_log(records.get(i..).unwrap_or_default())
            .is_ok_and(|state| !state.needs_history(&Entry::Wake))
    };
    let Some(&cut) = older.iter().rev().find(|&&i| fits(i)) else {
        return Err(if older.is_empty() {
            "the log holds one intact snapshot, and a trim keeps the one before the newest".into()
        } else {
            "no snapshot before the newest lies at a point a trim may keep from".into()
        });
    };
    let before = records.get(cut).map_or(Seq(0), |r| r.seq);
    let last = SessionState::of_log(records).map_err(|e| e.to_string())?;
    let (counted, since) = last.trimmed().map_or((0, Seq(0)), |t| (t.turns, t.before));
    let dropped = turn_starts.iter().filter(|s| **s >= since && **s < before).count() as u64;
    Ok((before, counted + dropped))
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::{SessionId, UnixMillis};

    use super::*;
    use crate::testlog::{Log, call};

    fn records(events: &[Event], from: u64) -> Vec<Record> {
        events
            .iter()
            .enumerate()
            .skip(from as usize)
            .map(|(i, e)| Record {
                session: SessionId::from_stored("s"),
                seq: Seq(i as u64),
                at: UnixMillis(i as u64),
                event: e.clone(),
            })
            .collect()
    }

    fn log() -> Log {
        Log::new()
            .reply(1, "cp-1", vec![call("c1", "t")])
            .attempt("c1", 1)
            .result("c1", 1)
            .commit(1, "cp-1-commit")
    }

    #[test]
    fn a_log_from_seq_0_folds_every_event_and_a_trimmed_one_starts_at_its_first_intact_snapshot() {
        let events = log().snapshot().reply(2, "cp-2", vec![call("c2", "t")]).attempt("c2", 1);
        let events = events.events;
        let whole = crate::fold(&events);
        assert!(SessionState::of_log(&records(&events, 0)).is_ok_and(|s| s == whole));
        let at = events.iter().position(|e| matches!(e, Event::Snapshot(_))).unwrap() as u64;
        let state = SessionState::of_log(&records(&events, at)).unwrap();
        assert_eq!(state.snapshot_seq(), Some(Seq(at)));
        assert_eq!(state.len(), events.len() as u64);
        let plan = |s: &SessionState| {
            let registry =
                crate::MemoryRegistry::new().with_tool("t", stepjournal_codec::Replay::Safe);
            let new_run = crate::NewRun {
                run: stepjournal_codec::RunId::new("r9"),
                entry: stepjournal_codec::Entry::Wake,
                commit_checkpoint: stepjournal_codec::CheckpointId::new("cp-9"),
            };
            crate::plan(s, &new_run, &registry, &crate::Config::default())
        };
        assert_eq!(plan(&state), plan(&whole), "the trimmed log plans as the whole one");
        // Cut one event before the snapshot (a store that drops whole batches): the same.
        let earlier = records(&events, at - 1);
        assert_eq!(SessionState::of_log_owned(earlier).unwrap(), state);
    }

    fn seqs_of_snapshots(events: &[Event]) -> Vec<u64> {
        (events.iter().enumerate())
            .filter(|(_, e)| matches!(e, Event::Snapshot(_)))
            .map(|(i, _)| i as u64)
            .collect()
    }

    #[test]
    fn a_trim_keeps_the_snapshot_before_the_newest_and_the_last_turns_whole() {
        let turn = |log: Log, n: u64| {
            log.run(&format!("r{n}"), Entry::NewTurn { message: format!("turn {n}") })
                .reply(n, &format!("cp-{n}"), vec![call(&format!("c{n}"), "t")])
                .attempt(&format!("c{n}"), 1)
                .result(&format!("c{n}"), 1)
                .commit(n, &format!("cp-{n}-commit"))
                .snapshot()
        };
        let mut log = Log::default();
        for n in 1..=4 {
            log = turn(log, n);
        }
        let events = log.events;
        let snaps = seqs_of_snapshots(&events);
        let all = records(&events, 0);
        // No turn kept whole: the snapshot before the newest.
        assert_eq!(trim_point(&all, 0).unwrap(), (Seq(snaps[2]), 3));
        // The last two turns whole: the newest snapshot before the third turn's start.
        assert_eq!(trim_point(&all, 2).unwrap(), (Seq(snaps[1]), 2));
        assert!(trim_point(&all, 5).unwrap_err().contains("4 turns"));
        // Trimmed once, the turns it dropped are counted on.
        let mut kept = records(&events, snaps[1]);
        let at = kept.len() as u64 + snaps[1];
        kept.push(Record {
            session: SessionId::from_stored("s"),
            seq: Seq(at),
            at: UnixMillis(at),
            event: Event::Trimmed(Trimmed { before: Seq(snaps[1]), turns: 2 }),
        });
        assert_eq!(trim_point(&kept, 0).unwrap(), (Seq(snaps[2]), 3));
        assert!(trim_point(&kept, 2).is_err(), "nothing more while two turns are kept");
    }

    #[test]
    fn a_trim_never_keeps_from_a_snapshot_a_later_rewound_reaches_back_past() {
        // The second step is retried after the first snapshot: its `rewound` reaches back to
        // the second reply, so only the snapshot before that reply may be kept.
        let log = log()
            .snapshot()
            .reply(2, "cp-2", vec![call("c2", "t")])
            .attempt("c2", 1)
            .result("c2", 1)
            .commit(2, "cp-2-commit")
            .snapshot()
            .rewound("cp-2")
            .snapshot();
        let events = log.events;
        let snaps = seqs_of_snapshots(&events);
        assert_eq!(snaps.len(), 3);
        let (before, _) = trim_point(&records(&events, 0), 0).unwrap();
        assert_eq!(before, Seq(snaps[0]), "not the one after the second step's reply");
    }

    #[test]
    fn a_trimmed_log_without_an_intact_snapshot_is_refused_saying_where_it_starts() {
        let events = log().events;
        let e = SessionState::of_log(&records(&events, 3)).unwrap_err();
        assert_eq!(e.first, Seq(3));
        assert!(e.to_string().contains("starts at seq 3"), "{e}");
    }
}
