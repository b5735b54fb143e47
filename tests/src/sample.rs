//! Sample events for tests: one of every type, and cheap varied events.

use stepjournal_codec::{
    ApprovalDecided, Attempt, AttemptStarted, Call, CallId, CallKind, CheckpointId, ChildAttached,
    ClientAnswer, ContinuationId, DispatchId, DispatchMinted, Entry, Event, ForkedFrom,
    FormatVersion, Message, ModelAborted, Operator, OutputChunk, PairReason, Paired, RawJson,
    Replay, ReplyCommitted, ResumeMode, Rewound, Role, RunEnded, RunId, RunOutcome, RunStarted,
    Seq, SessionId, Snapshot, SnapshotRun, SnapshotRunEnd, SnapshotStep, Stamped, StepCommit,
    StepNo, StepRange, Suspended, ToolName, ToolResult, UnixMillis,
};

/// One event of every type, with every optional member both present and absent somewhere (a
/// `snapshot` last: [`holdable_in`] leaves it out for format versions 1 and 2).
pub fn every_event_type() -> Vec<Event> {
    let c1 = CallId::from("c1");
    vec![
        RunStarted {
            run: RunId::from("r1"),
            entry: Entry::NewTurn { message: "hello".into() },
            by: None,
        }
        .into(),
        RunStarted {
            run: RunId::from("r2"),
            entry: Entry::Resume(ResumeMode::FromCheckpoint { checkpoint: "cp-1".into() }),
            by: None,
        }
        .into(),
        RunStarted {
            run: RunId::from("r3"),
            entry: Entry::Retry { checkpoint: Some("cp-1".into()), message: Some("again".into()) },
            by: None,
        }
        .into(),
        Message { role: Role::User, text: "hello, ünïcode \"quoted\"\n".into() }.into(),
        ReplyCommitted {
            step: StepNo(1),
            checkpoint: CheckpointId::from("cp-1"),
            text: "calling".into(),
            calls: vec![
                Call {
                    call: c1.clone(),
                    tool: ToolName::from("send_email"),
                    args: RawJson::parse(r#"{"to":"a@b","n":[1,2.50,-3e2]}"#).unwrap(),
                    kind: CallKind::Tool,
                    replay: Replay::Unsafe,
                    group: Some("mail".into()),
                    sequential: true,
                },
                Call {
                    call: CallId::from("c2"),
                    tool: ToolName::from("ask"),
                    args: RawJson::empty_object(),
                    kind: CallKind::Client,
                    replay: Replay::Safe,
                    group: None,
                    sequential: false,
                },
            ],
            metadata: None,
        }
        .into(),
        DispatchMinted { call: c1.clone(), dispatch: DispatchId::from("d1") }.into(),
        AttemptStarted { call: c1.clone(), attempt: Attempt(1) }.into(),
        OutputChunk { call: c1.clone(), attempt: Attempt(1), text: "part".into() }.into(),
        ToolResult {
            call: c1.clone(),
            attempt: Attempt(1),
            output: RawJson::parse(r#"{"ok":true}"#).unwrap(),
            is_error: false,
            metadata: None,
        }
        .into(),
        ApprovalDecided { call: c1.clone(), approved: false }.into(),
        ClientAnswer { call: CallId::from("c2"), output: RawJson::parse("\"yes\"").unwrap() }
            .into(),
        ChildAttached { call: c1.clone(), child: SessionId::new("s-9").unwrap() }.into(),
        Paired {
            call: c1.clone(),
            reason: PairReason::OutcomeUnknown,
            message: PairReason::OutcomeUnknown.model_message().into(),
            partial: "part".into(),
            rule: None,
        }
        .into(),
        Suspended { calls: vec![CallId::from("c2")] }.into(),
        StepCommit { step: StepNo(1), checkpoint: CheckpointId::from("cp-1-commit") }.into(),
        RunEnded {
            run: RunId::from("r1"),
            outcome: RunOutcome::Failed,
            error: Some("disk".into()),
            by: None,
        }
        .into(),
        RunEnded { run: RunId::from("r2"), outcome: RunOutcome::Completed, error: None, by: None }
            .into(),
        Rewound { to: CheckpointId::from("cp-1") }.into(),
        ModelAborted { partial: "half an ans".into(), continuation: None }.into(),
        Snapshot {
            len: 19,
            run: Some(SnapshotRun {
                seq: Seq(1),
                run: RunId::from("r2"),
                entry: Entry::Resume(ResumeMode::Continue),
            }),
            run_end: Some(SnapshotRunEnd {
                seq: Seq(16),
                run: RunId::from("r2"),
                outcome: RunOutcome::Completed,
                error: None,
            }),
            reply: Some(SnapshotStep {
                seq: Seq(3),
                step: StepNo(1),
                checkpoint: CheckpointId::from("cp-1"),
            }),
            commit: Some(SnapshotStep {
                seq: Seq(14),
                step: StepNo(1),
                checkpoint: CheckpointId::from("cp-1-commit"),
            }),
            committed: vec![StepRange { first: StepNo(1), last: StepNo(1) }],
        }
        .into(),
    ]
}

/// The events of `events` a record of format `version` can hold (a `snapshot` needs version 3).
pub fn holdable_in(events: Vec<Event>, version: FormatVersion) -> Vec<Event> {
    events.into_iter().filter(|e| e.kind().since() <= version).collect()
}

/// [`every_event_type`] with the members format version 2 added, each present once and absent
/// once: a `paired` with its rule, a `reply_committed` and a `tool_result` with metadata.
pub fn every_event_type_v2() -> Vec<Event> {
    let mut events = every_event_type();
    let mut extra = Vec::new();
    for e in &events {
        match e {
            Event::Paired(p) => {
                let mut p = p.clone();
                p.rule = Some("recovery.outcome_unknown".into());
                extra.push(Event::Paired(p));
            }
            Event::ReplyCommitted(r) => {
                let mut r = r.clone();
                r.step = StepNo(2);
                r.checkpoint = CheckpointId::from("cp-2");
                let usage = r#"{"model":"m-1","usage":{"input":12,"output":3},"reasoning":[]}"#;
                r.metadata = Some(RawJson::parse(usage).unwrap());
                extra.push(Event::ReplyCommitted(r));
            }
            Event::ToolResult(t) => {
                let mut t = t.clone();
                t.attempt = Attempt(2);
                t.metadata = Some(RawJson::parse(r#"{"took_ms":41,"cached":false}"#).unwrap());
                extra.push(Event::ToolResult(t));
            }
            _ => {}
        }
    }
    events.extend(extra);
    events
}

/// The events of the kinds format version 4 added, one of each: `forked_from`.
pub fn v4_kinds() -> Vec<Event> {
    vec![
        ForkedFrom {
            original: SessionId::new("s-original").unwrap(),
            commit_seq: Seq(14),
            checkpoint: CheckpointId::from("cp-1-commit"),
        }
        .into(),
    ]
}

/// [`every_event_type_v2`] with the members format version 4 added, each present and absent:
/// a `run_started` carrying who and why (`by` with a name and a reason) and one carrying only
/// who, a `run_ended` carrying only why (a stop), a `model_aborted` with the provider's
/// `continuation`; then the kinds version 4 added ([`v4_kinds`]). (The events of
/// [`every_event_type_v2`] hold each member absent.)
pub fn every_event_type_v4() -> Vec<Event> {
    let mut events = every_event_type_v2();
    let operator =
        |name: Option<&str>, reason: Option<&str>| Operator::new(name, reason).unwrap().unwrap();
    events.extend([
        RunStarted {
            run: RunId::from("r4"),
            entry: Entry::Wake,
            by: Some(operator(Some("ana"), Some("customer confirmed by phone, ticket #42"))),
        }
        .into(),
        RunStarted {
            run: RunId::from("r5"),
            entry: Entry::Wake,
            by: Some(operator(Some("bo ünïcode"), None)),
        }
        .into(),
        RunEnded {
            run: RunId::from("r5"),
            outcome: RunOutcome::Stopped,
            error: None,
            by: Some(operator(None, Some("runaway \"refund\" loop"))),
        }
        .into(),
        ModelAborted {
            partial: "the first half".into(),
            continuation: Some(ContinuationId::new("resp_bg_01J9").unwrap()),
        }
        .into(),
    ]);
    events.extend(v4_kinds());
    events
}

/// [`every_event_type_v4`] and the kinds format version 5 added, one of each: `trimmed`.
pub fn every_event_type_v5() -> Vec<Event> {
    let mut events = every_event_type_v4();
    events.push(stepjournal_codec::Trimmed { before: Seq(12), turns: 3 }.into());
    events
}

/// A small event whose text says `i`, so tests can tell events apart.
pub fn numbered(i: u64) -> Event {
    Message { role: Role::User, text: format!("event {i}") }.into()
}

/// `numbered(from..from + n)` stamped with a fixed time (so equality checks are exact).
pub fn stamped_numbered(from: u64, n: u64) -> Vec<Stamped> {
    (from..from + n).map(|i| Stamped::at(UnixMillis(1_700_000_000_000 + i), numbered(i))).collect()
}

/// An event whose encoded record is larger than `bytes`.
pub fn oversized(bytes: usize) -> Event {
    Message { role: Role::User, text: "x".repeat(bytes) }.into()
}
