//! proptest strategies for every event type, with arbitrary text and JSON.

use proptest::prelude::*;
use stepjournal_codec::{
    ApprovalDecided, Attempt, AttemptStarted, Call, CallId, CallKind, CheckpointId, ChildAttached,
    ClientAnswer, ContinuationId, DispatchId, DispatchMinted, Entry, Event, Message, ModelAborted,
    Operator, OutputChunk, PairReason, Paired, RawJson, Replay, ReplyCommitted, ResumeMode,
    Rewound, Role, RunEnded, RunId, RunOutcome, RunStarted, SessionId, StepCommit, StepNo,
    Suspended, ToolName, ToolResult,
};

/// Any text, including quotes, escapes, control characters and non-ASCII.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9 _-]{0,12}",
        any::<String>().prop_map(|s| s.chars().take(24).collect()),
        Just("line\nbreak \"quoted\" \\ tab\t é 😀".to_owned()),
    ]
}

fn id() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z][a-z0-9-]{0,8}", any::<String>().prop_map(|s| s.chars().take(10).collect())]
}

/// A run id that keeps the id rule ([`RunId::validate`]): any text but empty, holding no
/// character that acts on text.
fn run_id() -> impl Strategy<Value = RunId> {
    id().prop_map(|s| {
        let kept: String = s.chars().filter(|c| !stepjournal_codec::acts_on_text(*c)).collect();
        RunId::from(if kept.is_empty() { "r".to_owned() } else { kept })
    })
}

/// Text keeping the rule of an operator's name and reason and of a continuation: 1 to `max`
/// bytes, no character that acts on text.
fn kept(max: usize) -> impl Strategy<Value = String> {
    text().prop_map(move |s| {
        let mut kept: String = s.chars().filter(|c| !stepjournal_codec::acts_on_text(*c)).collect();
        while kept.len() > max {
            kept.pop();
        }
        if kept.is_empty() { "x".to_owned() } else { kept }
    })
}

/// Who and why, or no one (format version 4's `run_started.by` and `run_ended.by`).
fn by() -> impl Strategy<Value = Option<Operator>> {
    (proptest::option::of(kept(Operator::MAX_NAME)), proptest::option::of(kept(64)))
        .prop_map(|(name, reason)| Operator::new(name, reason).unwrap_or(None))
}

/// A continuation handle, or none (format version 4's `model_aborted.continuation`).
fn continuation() -> impl Strategy<Value = Option<ContinuationId>> {
    proptest::option::of(kept(64).prop_map(|c| ContinuationId::new(c).unwrap()))
}

fn session() -> impl Strategy<Value = SessionId> {
    "[a-zA-Z0-9_.:-]{1,16}".prop_map(|s| SessionId::new(s).unwrap())
}

/// Arbitrary JSON, as compact text.
pub fn json() -> impl Strategy<Value = RawJson> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(|n| serde_json::json!(n)),
        (-1.0e9f64..1.0e9).prop_map(|f| serde_json::json!(f)),
        text().prop_map(serde_json::Value::String),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    });
    value.prop_map(|v| RawJson::from_value(&v).unwrap())
}

fn call() -> impl Strategy<Value = Call> {
    let kind = prop_oneof![
        Just(CallKind::Tool),
        Just(CallKind::Client),
        Just(CallKind::Approval),
        Just(CallKind::RemoteAgent),
        Just(CallKind::LocalAgent),
        Just(CallKind::Companion),
    ];
    let replay = prop_oneof![Just(Replay::Safe), Just(Replay::Unsafe)];
    (id(), id(), json(), kind, replay, proptest::option::of(id()), any::<bool>()).prop_map(
        |(call, tool, args, kind, replay, group, sequential)| Call {
            call: CallId::from(call),
            tool: ToolName::from(tool),
            args,
            kind,
            replay,
            group,
            sequential,
        },
    )
}

/// Any entry.
pub fn entry() -> impl Strategy<Value = Entry> {
    prop_oneof![
        Just(Entry::Wake),
        Just(Entry::Stop),
        Just(Entry::Resume(ResumeMode::Continue)),
        text().prop_map(|message| Entry::Resume(ResumeMode::WithMessage { message })),
        id().prop_map(|c| Entry::Resume(ResumeMode::FromCheckpoint { checkpoint: c.into() })),
        (proptest::option::of(id()), proptest::option::of(text())).prop_map(|(c, message)| {
            Entry::Retry { checkpoint: c.map(CheckpointId::from), message }
        }),
        text().prop_map(|message| Entry::NewTurn { message }),
    ]
}

fn reason() -> impl Strategy<Value = PairReason> {
    prop_oneof![
        Just(PairReason::OutcomeUnknown),
        Just(PairReason::ReplayLimitReached),
        Just(PairReason::NotStarted),
        Just(PairReason::RunStopped),
    ]
}

fn outcome() -> impl Strategy<Value = RunOutcome> {
    prop_oneof![
        Just(RunOutcome::Completed),
        Just(RunOutcome::Failed),
        Just(RunOutcome::Stopped),
        Just(RunOutcome::Suspended),
    ]
}

/// Metadata as the JSON form can hold it: `null` there is an absent member, read back as none.
fn metadata() -> impl Strategy<Value = RawJson> {
    json().prop_filter("null metadata is none", |m| m.get() != "null")
}

/// Any event of any type.
pub fn event() -> impl Strategy<Value = Event> {
    let call_id = || id().prop_map(CallId::from);
    let attempt = || (1u32..5).prop_map(Attempt);
    prop_oneof![
        (run_id(), entry(), by()).prop_map(|(run, entry, by)| RunStarted { run, entry, by }.into()),
        text().prop_map(|text| Message { role: Role::User, text }.into()),
        (
            any::<u64>(),
            id(),
            text(),
            prop::collection::vec(call(), 0..4),
            proptest::option::of(metadata())
        )
            .prop_map(|(step, cp, text, calls, metadata)| ReplyCommitted {
                step: StepNo(step),
                checkpoint: CheckpointId::from(cp),
                text,
                calls,
                metadata,
            }
            .into()),
        (call_id(), id()).prop_map(|(call, d)| DispatchMinted {
            call,
            dispatch: DispatchId::from(d)
        }
        .into()),
        (call_id(), attempt()).prop_map(|(call, attempt)| AttemptStarted { call, attempt }.into()),
        (call_id(), attempt(), text()).prop_map(|(call, attempt, text)| OutputChunk {
            call,
            attempt,
            text
        }
        .into()),
        (call_id(), attempt(), json(), any::<bool>(), proptest::option::of(metadata())).prop_map(
            |(call, attempt, output, is_error, metadata)| {
                ToolResult { call, attempt, output, is_error, metadata }.into()
            }
        ),
        (call_id(), any::<bool>())
            .prop_map(|(call, approved)| ApprovalDecided { call, approved }.into()),
        (call_id(), json()).prop_map(|(call, output)| ClientAnswer { call, output }.into()),
        (call_id(), session()).prop_map(|(call, child)| ChildAttached { call, child }.into()),
        (call_id(), reason(), text(), text(), proptest::option::of(id())).prop_map(
            |(call, reason, message, partial, rule)| {
                Paired { call, reason, message, partial, rule }.into()
            }
        ),
        prop::collection::vec(call_id(), 0..4).prop_map(|calls| Suspended { calls }.into()),
        (any::<u64>(), id()).prop_map(|(s, c)| StepCommit {
            step: StepNo(s),
            checkpoint: CheckpointId::from(c)
        }
        .into()),
        (run_id(), outcome(), proptest::option::of(text()), by())
            .prop_map(|(run, outcome, error, by)| RunEnded { run, outcome, error, by }.into()),
        id().prop_map(|to| Rewound { to: CheckpointId::from(to) }.into()),
        (text(), continuation()).prop_map(|(partial, continuation)| ModelAborted {
            partial,
            continuation
        }
        .into()),
    ]
}

/// Any valid session id.
pub fn session_id() -> impl Strategy<Value = SessionId> {
    session()
}
