//! A proptest generator of protocol-shaped session logs: what a save-first runtime leaves behind
//! after any crash, failure, retry or suspension, with the registry as a later deploy left it and
//! an entry to plan.
//!
//! Earlier steps are complete (reply, dispatch ids, one body, result, step commit). The last step
//! is open in any state each call can be in (no body, bodies with output, result, client answer,
//! approval either way, child attached, pairings of any reason), followed by a tail: a crash, a
//! failed run that paired its open calls, a retry that rewound them, a suspension, a commit, a
//! stop, or a rewind that names no reply.

use proptest::prelude::*;
use stepjournal_codec::{
    ApprovalDecided, Attempt, AttemptStarted, Call, CallId, CallKind, CheckpointId, ChildAttached,
    ClientAnswer, DispatchId, DispatchMinted, Entry, Event, Message, ModelAborted, OutputChunk,
    PairReason, Paired, RawJson, Replay, ReplyCommitted, ResumeMode, Rewound, Role, RunEnded,
    RunId, RunOutcome, RunStarted, SessionId, StepCommit, StepNo, Suspended, ToolName, ToolResult,
};
use stepjournal_recovery::{Config, MemoryRegistry};

/// The tools calls name: two fixed policies, one the deploy may flip, one removed, one whose
/// schema now rejects every saved argument.
pub const TOOLS: [&str; 5] = ["safe_a", "unsafe_b", "flip", "gone", "strict"];

/// One generated case: a log, the registry now, the settings and an entry.
#[derive(Debug, Clone)]
pub struct ProtocolCase {
    /// The session's events, oldest first.
    pub events: Vec<Event>,
    /// The registry as it is now.
    pub registry: MemoryRegistry,
    /// `max_bodies` from 1 to 4.
    pub config: Config,
    /// The entry to plan.
    pub entry: Entry,
}

/// A call of the open step, as generated.
#[derive(Debug, Clone)]
pub struct CallSpec {
    kind: CallKind,
    tool: &'static str,
    replay: Replay,
    group: Option<&'static str>,
    sequential: bool,
    bodies: u32,
    chunks: u8,
    outcome: Outcome,
}

/// Where a call of the open step stands when the log ends.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Open,
    Result,
    Answer,
    Approved,
    Denied,
    Child,
    Paired(PairReason),
}

/// How the open step's run ended.
#[derive(Debug, Clone, Copy)]
enum Tail {
    Crash,
    Failed,
    FailedThenRetried,
    Suspended,
    Committed,
    Stopped,
    RewoundNowhere,
}

fn kind() -> impl Strategy<Value = CallKind> {
    prop_oneof![
        4 => Just(CallKind::Tool),
        1 => Just(CallKind::Client),
        1 => Just(CallKind::Approval),
        1 => Just(CallKind::RemoteAgent),
        1 => Just(CallKind::LocalAgent),
        1 => Just(CallKind::Companion),
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

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        8 => Just(Outcome::Open),
        2 => Just(Outcome::Result),
        1 => Just(Outcome::Answer),
        1 => Just(Outcome::Approved),
        1 => Just(Outcome::Denied),
        1 => Just(Outcome::Child),
        1 => reason().prop_map(Outcome::Paired),
    ]
}

fn call_spec() -> impl Strategy<Value = CallSpec> {
    (
        kind(),
        prop::sample::select(TOOLS.as_slice()),
        any::<bool>(),
        prop::option::weighted(0.4, prop::sample::select(["g1", "g2"].as_slice())),
        prop::bool::weighted(0.3),
        0u32..5,
        0u8..3,
        outcome(),
    )
        .prop_map(|(kind, tool, safe, group, sequential, bodies, chunks, outcome)| CallSpec {
            kind,
            tool,
            replay: if safe { Replay::Safe } else { Replay::Unsafe },
            group,
            sequential,
            bodies,
            chunks,
            outcome,
        })
}

fn tail() -> impl Strategy<Value = Tail> {
    prop_oneof![
        5 => Just(Tail::Crash),
        3 => Just(Tail::Failed),
        3 => Just(Tail::FailedThenRetried),
        1 => Just(Tail::Suspended),
        1 => Just(Tail::Committed),
        1 => Just(Tail::Stopped),
        1 => Just(Tail::RewoundNowhere),
    ]
}

/// Every entry kind, each checkpoint-carrying one with every checkpoint that matters: the open
/// step's append, the last commit, the first reply's append, and one the log never names.
pub fn every_entry(events: &[Event]) -> Vec<Entry> {
    let mut appends = Vec::new();
    let mut commits = Vec::new();
    for e in events {
        match e {
            Event::ReplyCommitted(r) => appends.push(r.checkpoint.clone()),
            Event::StepCommit(c) => commits.push(c.checkpoint.clone()),
            _ => {}
        }
    }
    let mut checkpoints: Vec<CheckpointId> =
        [appends.last(), commits.last(), appends.first()].into_iter().flatten().cloned().collect();
    checkpoints.push(CheckpointId::new("cp-never"));
    checkpoints.dedup();
    let message = || "change of plan".to_owned();
    let mut entries = vec![
        Entry::Wake,
        Entry::Resume(ResumeMode::Continue),
        Entry::Resume(ResumeMode::WithMessage { message: message() }),
        Entry::Retry { checkpoint: None, message: None },
        Entry::Retry { checkpoint: None, message: Some(message()) },
        Entry::NewTurn { message: message() },
        Entry::Stop,
    ];
    for checkpoint in checkpoints {
        entries.push(Entry::Resume(ResumeMode::FromCheckpoint { checkpoint: checkpoint.clone() }));
        entries
            .push(Entry::Retry { checkpoint: Some(checkpoint.clone()), message: Some(message()) });
        entries.push(Entry::Retry { checkpoint: Some(checkpoint), message: None });
    }
    entries
}

/// An entry for `events`, weighted toward the ones that recover (so that most cases exercise the
/// table): any of [`every_entry`] a fifth of the time.
pub fn entry_for(events: &[Event]) -> impl Strategy<Value = Entry> + use<> {
    let last_append = events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::ReplyCommitted(r) => Some(r.checkpoint.clone()),
            _ => None,
        })
        .unwrap_or_else(|| CheckpointId::new("cp-never"));
    prop_oneof![
        3 => Just(Entry::Wake),
        3 => Just(Entry::Resume(ResumeMode::Continue)),
        2 => Just(Entry::Retry {
            checkpoint: None,
            message: None,
        }),
        2 => Just(Entry::Resume(ResumeMode::FromCheckpoint {
            checkpoint: last_append,
        })),
        1 => Just(Entry::Resume(ResumeMode::WithMessage {
            message: "instead".into(),
        })),
        1 => Just(Entry::Stop),
        3 => prop::sample::select(every_entry(events)),
    ]
}

/// A generated protocol-shaped log with its registry, settings and entry.
pub fn protocol_case() -> impl Strategy<Value = ProtocolCase> {
    (
        0u64..3,
        prop::collection::vec(call_spec(), 0..6),
        tail(),
        any::<bool>(),
        any::<bool>(),
        1u32..5,
    )
        .prop_flat_map(|(earlier, calls, tail, flip_safe, aborted, max_bodies)| {
            let events = build_log(earlier, &calls, tail, aborted);
            let registry = registry(flip_safe);
            let config = Config::new(max_bodies).unwrap();
            entry_for(&events).prop_map(move |entry| ProtocolCase {
                events: events.clone(),
                registry: registry.clone(),
                config,
                entry,
            })
        })
}

/// The registry after a deploy: `flip` is safe or unsafe, `gone` removed.
pub fn registry(flip_safe: bool) -> MemoryRegistry {
    let flip = if flip_safe { Replay::Safe } else { Replay::Unsafe };
    MemoryRegistry::new()
        .with_tool("safe_a", Replay::Safe)
        .with_tool("unsafe_b", Replay::Unsafe)
        .with_tool("flip", flip)
        .with_rejecting_tool("strict", Replay::Safe, "the schema now requires `scope`")
}

fn cid(s: &str) -> CallId {
    CallId::new(s)
}

struct Writer {
    events: Vec<Event>,
    runs: u32,
}

impl Writer {
    fn push(&mut self, e: impl Into<Event>) {
        self.events.push(e.into());
    }

    fn run(&mut self, entry: Entry) -> RunId {
        self.runs += 1;
        let run = RunId::new(format!("r{}", self.runs));
        self.push(RunStarted { run: run.clone(), entry, by: None });
        run
    }

    fn reply(&mut self, step: u64, calls: Vec<Call>) {
        let ids: Vec<CallId> = calls.iter().map(|c| c.call.clone()).collect();
        self.push(ReplyCommitted {
            step: StepNo(step),
            checkpoint: CheckpointId::new(format!("cp-{step}")),
            text: String::new(),
            calls,
            metadata: None,
        });
        for id in ids {
            let dispatch = DispatchId::new(format!("d-{id}"));
            self.push(DispatchMinted { call: id, dispatch });
        }
    }
}

fn build_log(earlier: u64, calls: &[CallSpec], tail: Tail, aborted: bool) -> Vec<Event> {
    let mut w = Writer { events: Vec::new(), runs: 0 };
    let run = w.run(Entry::NewTurn { message: "hello".into() });
    w.push(Message { role: Role::User, text: "hello".into() });
    for step in 1..=earlier {
        let id = format!("s{step}c1");
        w.reply(
            step,
            vec![Call {
                call: cid(&id),
                tool: ToolName::new("safe_a"),
                args: RawJson::empty_object(),
                kind: CallKind::Tool,
                replay: Replay::Safe,
                group: None,
                sequential: false,
            }],
        );
        w.push(AttemptStarted { call: cid(&id), attempt: Attempt(1) });
        w.push(ToolResult {
            call: cid(&id),
            attempt: Attempt(1),
            output: RawJson::null(),
            is_error: false,
            metadata: None,
        });
        w.push(StepCommit {
            step: StepNo(step),
            checkpoint: CheckpointId::new(format!("cp-{step}-commit")),
        });
    }
    if aborted {
        w.push(ModelAborted { partial: "I was about to".into(), continuation: None });
    }
    let step = earlier + 1;
    let specs: Vec<(CallId, &CallSpec)> =
        calls.iter().enumerate().map(|(j, s)| (cid(&format!("s{step}c{}", j + 1)), s)).collect();
    w.reply(
        step,
        specs
            .iter()
            .map(|(id, s)| Call {
                call: id.clone(),
                tool: ToolName::new(s.tool),
                args: RawJson::empty_object(),
                kind: s.kind,
                replay: s.replay,
                group: s.group.map(str::to_owned),
                sequential: s.sequential,
            })
            .collect(),
    );
    // What each call ended with: resolved or not, and its bodies, for the tail.
    let mut open: Vec<(CallId, u32, CallKind)> = Vec::new();
    for (id, s) in &specs {
        let bodies = if s.kind == CallKind::Client { 0 } else { s.bodies };
        if s.kind == CallKind::Approval && matches!(s.outcome, Outcome::Approved | Outcome::Denied)
        {
            w.push(ApprovalDecided {
                call: id.clone(),
                approved: matches!(s.outcome, Outcome::Approved),
            });
        }
        let denied = s.kind == CallKind::Approval && matches!(s.outcome, Outcome::Denied);
        let bodies = if denied { 0 } else { bodies };
        for a in 1..=bodies {
            w.push(AttemptStarted { call: id.clone(), attempt: Attempt(a) });
        }
        for n in 0..s.chunks.min(if bodies > 0 { 2 } else { 0 }) {
            w.push(OutputChunk {
                call: id.clone(),
                attempt: Attempt(bodies),
                text: format!("out{n} "),
            });
        }
        let resolved = match s.outcome {
            Outcome::Result if bodies > 0 => {
                w.push(ToolResult {
                    call: id.clone(),
                    attempt: Attempt(bodies),
                    output: RawJson::null(),
                    is_error: false,
                    metadata: None,
                });
                true
            }
            Outcome::Answer if s.kind == CallKind::Client => {
                w.push(ClientAnswer { call: id.clone(), output: RawJson::null() });
                true
            }
            Outcome::Child if s.kind != CallKind::Client => {
                w.push(ChildAttached {
                    call: id.clone(),
                    child: SessionId::new(format!("child-{id}")).unwrap(),
                });
                false
            }
            Outcome::Paired(reason) => {
                w.push(Paired {
                    call: id.clone(),
                    reason,
                    message: reason.model_message().to_owned(),
                    partial: String::new(),
                    rule: None,
                });
                true
            }
            _ => denied,
        };
        if !resolved {
            open.push((id.clone(), bodies, s.kind));
        }
    }
    let pair_open = |w: &mut Writer, open: &[(CallId, u32, CallKind)], stop: bool| {
        for (id, bodies, _) in open {
            let reason = if stop {
                PairReason::RunStopped
            } else if *bodies > 0 {
                PairReason::OutcomeUnknown
            } else {
                PairReason::NotStarted
            };
            w.push(Paired {
                call: id.clone(),
                reason,
                message: reason.model_message().to_owned(),
                partial: String::new(),
                rule: None,
            });
        }
    };
    let end = |w: &mut Writer, run: &RunId, outcome| {
        w.push(RunEnded { run: run.clone(), outcome, error: None, by: None })
    };
    match tail {
        Tail::Crash => {}
        Tail::Failed => {
            pair_open(&mut w, &open, false);
            end(&mut w, &run, RunOutcome::Failed);
        }
        Tail::FailedThenRetried => {
            pair_open(&mut w, &open, false);
            end(&mut w, &run, RunOutcome::Failed);
            w.run(Entry::Retry { checkpoint: None, message: None });
            w.push(Rewound { to: CheckpointId::new(format!("cp-{step}")) });
        }
        Tail::Suspended => {
            let waiting: Vec<CallId> = open
                .iter()
                .filter(|(_, _, k)| matches!(k, CallKind::Client | CallKind::Approval))
                .map(|(id, _, _)| id.clone())
                .collect();
            w.push(Suspended { calls: waiting });
            end(&mut w, &run, RunOutcome::Suspended);
        }
        Tail::Committed => {
            pair_open(&mut w, &open, false);
            w.push(StepCommit {
                step: StepNo(step),
                checkpoint: CheckpointId::new(format!("cp-{step}-commit")),
            });
            end(&mut w, &run, RunOutcome::Completed);
        }
        Tail::Stopped => {
            pair_open(&mut w, &open, true);
            w.push(StepCommit {
                step: StepNo(step),
                checkpoint: CheckpointId::new(format!("cp-{step}-commit")),
            });
            end(&mut w, &run, RunOutcome::Stopped);
        }
        Tail::RewoundNowhere => {
            w.run(Entry::Wake);
            w.push(Rewound { to: CheckpointId::new("cp-nowhere") });
        }
    }
    w.events
}
