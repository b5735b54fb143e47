//! Protocol invariants of a log: what a correct writer never leaves behind.

use std::fmt;

use stepjournal_codec::{
    Attempt, CallId, Event, EventKind, Record, RunId, RunOutcome, Seq, StepNo,
};

use crate::SessionState;

/// One thing wrong with a log: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The event at fault.
    pub seq: Seq,
    /// What is wrong with it.
    pub problem: Problem,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq {}: {}", self.seq, self.problem)
    }
}

/// What a [`Finding`] found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// An event names a call that no reply before it holds.
    #[error("`{event}` names call `{call}`, which no earlier reply holds")]
    UnknownCall {
        /// The event's type.
        event: EventKind,
        /// The call named.
        call: CallId,
    },
    /// A reply names one call id twice.
    #[error("the reply of step {step} names call `{call}` twice")]
    RepeatedCall {
        /// The reply's step.
        step: StepNo,
        /// The repeated id.
        call: CallId,
    },
    /// A second `dispatch_minted` for one call.
    #[error("call `{call}` already had its dispatch id minted at seq {first}")]
    DispatchMintedTwice {
        /// The call.
        call: CallId,
        /// The first `dispatch_minted`.
        first: Seq,
    },
    /// An `attempt_started` whose number is not the next one.
    #[error("call `{call}` started attempt {found}; the next attempt is {expected}")]
    AttemptNotDense {
        /// The call.
        call: CallId,
        /// The attempt the event gives.
        found: Attempt,
        /// Bodies started before it + 1.
        expected: Attempt,
    },
    /// A body started for a call with no dispatch id yet.
    #[error("call `{call}` started a body before its dispatch id was minted")]
    AttemptBeforeDispatch {
        /// The call.
        call: CallId,
    },
    /// A body started for a call that was already resolved.
    #[error("call `{call}` started a body although it was already resolved")]
    AttemptAfterResolved {
        /// The call.
        call: CallId,
    },
    /// Output or a result for an attempt that never started.
    #[error("`{event}` for call `{call}` names attempt {attempt}, which never started")]
    AttemptNeverStarted {
        /// The event's type.
        event: EventKind,
        /// The call.
        call: CallId,
        /// The attempt named.
        attempt: Attempt,
    },
    /// A call resolved again while an earlier resolution still counts.
    #[error("`{event}` resolves call `{call}`, already resolved at seq {first}")]
    ResolvedTwice {
        /// The event's type.
        event: EventKind,
        /// The call.
        call: CallId,
        /// The resolution that still counts.
        first: Seq,
    },
    /// A `step_commit` before any reply.
    #[error("step {step} is committed before any reply")]
    CommitWithoutReply {
        /// The step committed.
        step: StepNo,
    },
    /// A `step_commit` for another step than the last reply's.
    #[error("step {step} is committed, but the last reply opened step {last}")]
    CommitOutOfOrder {
        /// The step committed.
        step: StepNo,
        /// The last reply's step.
        last: StepNo,
    },
    /// A second `step_commit` for one step.
    #[error("step {step} is committed twice")]
    CommittedTwice {
        /// The step.
        step: StepNo,
    },
    /// A `run_ended` for a run that had already ended `completed`, `failed` or `stopped` (only a
    /// run that ended `suspended` is ended again, by a stop).
    #[error("run `{run}` is ended again; it already ended `{}` at seq {first}", .outcome.as_str())]
    EndedTwice {
        /// The run.
        run: RunId,
        /// Its first `run_ended` that still counts.
        first: Seq,
        /// How that one ended it.
        outcome: RunOutcome,
    },
    /// A `snapshot` that is not the fold of the log before it: a fold starting there would
    /// plan otherwise than a fold of the whole log.
    #[error("the snapshot {why}")]
    SnapshotDisagrees {
        /// How it differs.
        why: String,
    },
    /// A `forked_from` that is not the first event of the log: it stands for nothing there.
    #[error("`forked_from` (of session `{original}`) is not the log's first event")]
    ForkNotFirst {
        /// The original session it names.
        original: stepjournal_codec::SessionId,
    },
    /// A fork whose `forked_from` is not followed by the snapshot of the original's state, or
    /// by one that cannot stand there: the fork folds as a session with no history.
    #[error("the fork of session `{original}` does not open with a usable snapshot: {why}")]
    ForkWithoutSnapshot {
        /// The original session.
        original: stepjournal_codec::SessionId,
        /// What is there instead.
        why: String,
    },
    /// A trimmed log (it starts after seq 0) that cannot be folded: no intact snapshot to
    /// start from, or its last `trimmed` names a seq that is not a snapshot it keeps.
    #[error("the trimmed log {why}")]
    Trimmed {
        /// What is wrong.
        why: String,
    },
}

/// Checks a log against the protocol: dispatch ids minted once per call, attempts dense from 1,
/// results, pairings and answers only for calls of a reply, nothing resolved twice unless a
/// `rewound` voided the first, steps committed in order, every `snapshot` the fold of the log
/// before it. An empty list means none was broken.
pub fn verify(events: &[Event]) -> Vec<Finding> {
    verify_from(SessionState::default(), events.iter())
}

/// [`verify`] of a log as a store keeps it: from seq 0, or, when it was trimmed (it starts
/// later), from its first intact snapshot, whose state the log before it no longer holds to
/// check against; the last `trimmed` must name a snapshot the log keeps.
pub fn verify_log(records: &[Record]) -> Vec<Finding> {
    let first = records.first().map_or(Seq(0), |r| r.seq);
    let (taken, state) = match SessionState::start_of(records) {
        Ok(start) => start,
        Err(e) => {
            let why = e.to_string();
            let why = why.strip_prefix("the log ").unwrap_or(&why).to_owned();
            return vec![Finding { seq: first, problem: Problem::Trimmed { why } }];
        }
    };
    let mut findings = Vec::new();
    let last_trim = records.iter().rev().find_map(|r| match &r.event {
        Event::Trimmed(t) => Some((r.seq, t.before)),
        _ => None,
    });
    match last_trim {
        Some((seq, before)) => {
            let kept = before
                .get()
                .checked_sub(first.get())
                .and_then(|k| records.get(usize::try_from(k).ok()?))
                .filter(|r| r.seq == before);
            if !matches!(kept.map(|r| &r.event), Some(Event::Snapshot(_))) {
                let why = format!(
                    "names seq {before} as its first kept, which is not a snapshot it keeps"
                );
                findings.push(Finding { seq, problem: Problem::Trimmed { why } });
            }
        }
        None if first > Seq(0) => findings.push(Finding {
            seq: first,
            problem: Problem::Trimmed {
                why: format!("starts at seq {first}, and no `trimmed` says why"),
            },
        }),
        None => {}
    }
    findings.extend(verify_from(state, records.iter().skip(taken).map(|r| &r.event)));
    findings
}

fn verify_from<'a>(
    mut state: SessionState,
    events: impl Iterator<Item = &'a Event>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for event in events {
        let seq = Seq(state.len());
        let mut found = |problem| findings.push(Finding { seq, problem });
        check(&state, event, &mut found);
        state.apply(event);
        if let Event::ReplyCommitted(reply) = event
            && let Some(call) = state.last_reply().and_then(|r| r.repeated_call.clone())
        {
            found(Problem::RepeatedCall { step: reply.step, call });
        }
    }
    findings
}

fn named_call(event: &Event) -> Option<&CallId> {
    match event {
        Event::DispatchMinted(e) => Some(&e.call),
        Event::AttemptStarted(e) => Some(&e.call),
        Event::OutputChunk(e) => Some(&e.call),
        Event::ToolResult(e) => Some(&e.call),
        Event::ApprovalDecided(e) => Some(&e.call),
        Event::ClientAnswer(e) => Some(&e.call),
        Event::ChildAttached(e) => Some(&e.call),
        Event::Paired(e) => Some(&e.call),
        _ => None,
    }
}

fn resolves(event: &Event) -> bool {
    match event {
        Event::ToolResult(_) | Event::ClientAnswer(_) | Event::Paired(_) => true,
        Event::ApprovalDecided(e) => !e.approved,
        _ => false,
    }
}

fn check(state: &SessionState, event: &Event, found: &mut impl FnMut(Problem)) {
    if let Event::ForkedFrom(e) = event {
        if !state.is_empty() {
            found(Problem::ForkNotFirst { original: e.original.clone() });
        }
        return;
    }
    // The event after a fork's `forked_from`: the original's state, which the log before it
    // cannot be checked against; it must stand at seq 1 and end at the fork's commit.
    if let Some(fork) = state.forked_from()
        && state.len() == 1
    {
        let why = match event {
            Event::Snapshot(snapshot) => match snapshot.flaw(Seq(1)) {
                Some(flaw) => Some(flaw),
                None if snapshot.commit.as_ref().map(|c| &c.checkpoint)
                    != Some(&fork.checkpoint) =>
                {
                    Some(format!(
                        "its last commit is not the fork's step commit `{}`",
                        fork.checkpoint
                    ))
                }
                None => None,
            },
            other => Some(format!("the second event is `{}`", other.kind())),
        };
        if let Some(why) = why {
            found(Problem::ForkWithoutSnapshot { original: fork.original.clone(), why });
        }
        if matches!(event, Event::Snapshot(_)) {
            return;
        }
    }
    if let Event::Snapshot(snapshot) = event {
        let why = match state.snapshot() {
            None => Some("is not at a committed step boundary (the last reply has no step_commit)"),
            Some(ours) if ours != **snapshot => {
                Some("disagrees with the fold of the log before it")
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            found(Problem::SnapshotDisagrees { why: why.to_owned() });
        }
        return;
    }
    if let Event::RunEnded(e) = event {
        let ended = state
            .run_ends()
            .iter()
            .find(|end| end.run == e.run && end.counts() && end.outcome != RunOutcome::Suspended);
        if let Some(first) = ended {
            found(Problem::EndedTwice {
                run: e.run.clone(),
                first: first.seq,
                outcome: first.outcome,
            });
        }
        return;
    }
    if let Event::StepCommit(e) = event {
        match state.last_reply() {
            None => found(Problem::CommitWithoutReply { step: e.step }),
            Some(last) if last.step != e.step => {
                found(Problem::CommitOutOfOrder { step: e.step, last: last.step })
            }
            Some(_) if state.is_committed(e.step) => {
                found(Problem::CommittedTwice { step: e.step })
            }
            Some(_) => {}
        }
        return;
    }
    let Some(id) = named_call(event) else {
        return;
    };
    let Some(call) = state.call(id) else {
        found(Problem::UnknownCall { event: event.kind(), call: id.clone() });
        return;
    };
    let id = id.clone();
    match event {
        Event::DispatchMinted(_) => {
            if let Some(first) = call.dispatches().next() {
                found(Problem::DispatchMintedTwice { call: id.clone(), first: first.seq });
            }
        }
        Event::AttemptStarted(e) => {
            let expected = Attempt(call.bodies().saturating_add(1));
            if e.attempt != expected {
                found(Problem::AttemptNotDense { call: id.clone(), found: e.attempt, expected });
            }
            if call.dispatch().is_none() {
                found(Problem::AttemptBeforeDispatch { call: id.clone() });
            }
            if call.is_resolved() {
                found(Problem::AttemptAfterResolved { call: id.clone() });
            }
        }
        Event::OutputChunk(e) if !call.attempts().any(|a| a.attempt == e.attempt) => {
            found(Problem::AttemptNeverStarted {
                event: event.kind(),
                call: id.clone(),
                attempt: e.attempt,
            });
        }
        Event::ToolResult(e) if !call.attempts().any(|a| a.attempt == e.attempt) => {
            found(Problem::AttemptNeverStarted {
                event: event.kind(),
                call: id.clone(),
                attempt: e.attempt,
            });
        }
        _ => {}
    }
    if resolves(event)
        && let Some(first) = call.resolution()
    {
        found(Problem::ResolvedTwice { event: event.kind(), call: id, first: first.seq() });
    }
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::PairReason;

    use super::*;
    use crate::testlog::*;

    fn problems(log: &Log) -> Vec<String> {
        verify(&log.events).iter().map(|f| f.to_string()).collect()
    }

    #[test]
    fn a_protocol_shaped_log_has_no_findings() {
        let log = Log::new()
            .reply(1, "cp-1", vec![call("c1", "safe_tool").safe()])
            .bodies("c1", 1)
            .paired("c1", PairReason::OutcomeUnknown)
            .ended("r1", RunOutcome::Failed)
            .run("r2", retry())
            .rewound("cp-1")
            .attempt("c1", 2)
            .chunk("c1", 2, "x")
            .result("c1", 2)
            .commit(1, "cp-1-commit");
        assert_eq!(problems(&log), Vec::<String>::new());
    }

    #[test]
    fn each_broken_invariant_is_found_at_its_seq() {
        let log = Log::new()
            .reply(1, "cp-1", vec![call("c1", "unsafe_tool"), call("c1", "x")])
            .attempt("c1", 2)
            .result("c1", 7)
            .paired("c1", PairReason::OutcomeUnknown)
            .attempt("ghost", 1)
            .commit(2, "cp-2")
            .commit(1, "cp-1-commit")
            .commit(1, "cp-1-commit-again");
        let found = problems(&log);
        let expect = [
            "seq 2: the reply of step 1 names call `c1` twice",
            "seq 4: call `c1` already had its dispatch id minted at seq 3",
            "seq 5: call `c1` started attempt 2; the next attempt is 1",
            "seq 6: `tool_result` for call `c1` names attempt 7, which never started",
            "seq 7: `paired` resolves call `c1`, already resolved at seq 6",
            "seq 8: `attempt_started` names call `ghost`, which no earlier reply holds",
            "seq 9: step 2 is committed, but the last reply opened step 1",
            "seq 11: step 1 is committed twice",
        ];
        assert_eq!(found, expect);
    }

    #[test]
    fn a_run_ended_again_after_completing_is_found_and_a_stop_after_a_suspension_is_not() {
        // Regression: a stop racing a run's own end wrote a second `run_ended` for the run, and
        // verify called the log clean.
        let log = Log::new()
            .run("r1", wake())
            .ended("r1", RunOutcome::Completed)
            .ended("r1", RunOutcome::Stopped)
            .run("r2", wake())
            .ended("r2", RunOutcome::Suspended)
            .ended("r2", RunOutcome::Stopped);
        let found = problems(&log);
        let expect = ["seq 4: run `r1` is ended again; it already ended `completed` at seq 3"];
        assert_eq!(found, expect);
    }
}
