//! Sample events for tests: one of every type, and cheap varied events.

use stepjournal_codec::{
    ApprovalDecided, Attempt, AttemptStarted, Call, CallId, CallKind, CheckpointId, ChildAttached,
    ClientAnswer, DispatchId, DispatchMinted, Entry, Event, Message, ModelAborted, OutputChunk,
    PairReason, Paired, RawJson, Replay, ReplyCommitted, ResumeMode, Rewound, Role, RunEnded,
    RunId, RunOutcome, RunStarted, SessionId, Stamped, StepCommit, StepNo, Suspended, ToolName,
    ToolResult, UnixMillis,
};

/// One event of every type, with every optional member both present and absent somewhere.
pub fn every_event_type() -> Vec<Event> {
    let c1 = CallId::from("c1");
    vec![
        RunStarted { run: RunId::from("r1"), entry: Entry::NewTurn { message: "hello".into() } }
            .into(),
        RunStarted {
            run: RunId::from("r2"),
            entry: Entry::Resume(ResumeMode::FromCheckpoint { checkpoint: "cp-1".into() }),
        }
        .into(),
        RunStarted {
            run: RunId::from("r3"),
            entry: Entry::Retry { checkpoint: Some("cp-1".into()), message: Some("again".into()) },
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
        }
        .into(),
        Suspended { calls: vec![CallId::from("c2")] }.into(),
        StepCommit { step: StepNo(1), checkpoint: CheckpointId::from("cp-1-commit") }.into(),
        RunEnded {
            run: RunId::from("r1"),
            outcome: RunOutcome::Failed,
            error: Some("disk".into()),
        }
        .into(),
        RunEnded { run: RunId::from("r2"), outcome: RunOutcome::Completed, error: None }.into(),
        Rewound { to: CheckpointId::from("cp-1") }.into(),
        ModelAborted { partial: "half an ans".into() }.into(),
    ]
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
