//! The recovery fold and planner over structured logs: any order of any events, over small sets
//! of ids so that events name each other's calls, checkpoints and runs.

use arbitrary::{Arbitrary, Unstructured};
use stepjournal_codec::{
    ApprovalDecided, Attempt, AttemptStarted, Call, CallId, CallKind, CheckpointId, ChildAttached,
    ClientAnswer, DispatchId, DispatchMinted, Entry, Event, Message, ModelAborted, OutputChunk,
    PairReason, Paired, RawJson, Replay, ReplyCommitted, ResumeMode, Rewound, Role, RunEnded,
    RunId, RunOutcome, RunStarted, SessionId, StepCommit, StepNo, Suspended, ToolName, ToolResult,
};
use stepjournal_recovery::{
    Agreement, Config, MemoryRegistry, NewRun, SessionState, fold, fold_owned, forks_agree, plan,
    snapshots_agree, transcript, trims_agree, verify,
};

use super::{check_plan, ensure};

/// The most events a log is built with.
const MAX_EVENTS: usize = 400;
/// How many entries are planned after the first one, each over the log with the previous plan's
/// appends.
const MAX_LATER: usize = 4;
/// Tools `t0`..`t3` are in the registry as the input says; `t4` never is.
const TOOLS: u8 = 5;

/// A log, the registry, `max_bodies`, an entry and the entries that follow it.
#[derive(Debug, Clone, Arbitrary)]
pub struct FoldInput {
    /// What each of tools `t0`..`t3` is now.
    pub tools: [ToolSpec; 4],
    /// `max_bodies` (0 is refused by [`Config::new`] and replaced by the default).
    pub max_bodies: u8,
    /// The entry planned first.
    pub entry: EntrySpec,
    /// Entries planned after it, each once the previous plan's appends are in the log.
    pub later: Vec<EntrySpec>,
    /// The session's events, oldest first.
    pub events: Vec<EventSpec>,
}

impl FoldInput {
    /// The input the `fold_plan` target decodes from `data` (None when `data` is too short).
    pub fn from_bytes(data: &[u8]) -> Option<FoldInput> {
        FoldInput::arbitrary_take_rest(Unstructured::new(data)).ok()
    }
}

/// A tool as the registry now has it.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum ToolSpec {
    /// Safe to replay, any arguments.
    Safe,
    /// Not safe to replay.
    Unsafe,
    /// Safe, but every saved argument fails its schema.
    Rejecting,
    /// Removed.
    Removed,
}

/// An entry.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum EntrySpec {
    /// `wake`.
    Wake,
    /// `stop`.
    Stop,
    /// `resume` continuing.
    Continue,
    /// `resume` with a message.
    WithMessage,
    /// `resume` from checkpoint `cp{n % 6}`.
    FromCheckpoint(u8),
    /// `retry`, from a checkpoint or not, with a message or not.
    Retry {
        /// The checkpoint, if any.
        checkpoint: Option<u8>,
        /// Whether a message goes with it.
        message: bool,
    },
    /// `new_turn`.
    NewTurn,
}

/// A call of a reply.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub struct CallSpec {
    call: u8,
    tool: u8,
    kind: u8,
    safe: bool,
    group: Option<u8>,
    sequential: bool,
    args_bad: bool,
}

/// An event, over small id sets: calls `c0`..`c7`, checkpoints `cp0`..`cp5`, runs `r0`..`r3`.
#[derive(Debug, Clone, Arbitrary)]
pub enum EventSpec {
    /// `run_started`.
    RunStarted { run: u8, entry: EntrySpec },
    /// `message`.
    Message,
    /// `reply_committed`.
    Reply { step: u8, checkpoint: u8, calls: Vec<CallSpec> },
    /// `reply_committed` followed by a `dispatch_minted` for each call, as the writer does.
    ReplyDispatched { step: u8, checkpoint: u8, calls: Vec<CallSpec> },
    /// `dispatch_minted`.
    Dispatch { call: u8, dispatch: u8 },
    /// `attempt_started`.
    Attempt { call: u8, attempt: u8 },
    /// `output_chunk`.
    Chunk { call: u8, attempt: u8, text: u8 },
    /// `tool_result`.
    Result { call: u8, attempt: u8, is_error: bool },
    /// `approval_decided`.
    Approval { call: u8, approved: bool },
    /// `client_answer`.
    Answer { call: u8 },
    /// `child_attached`.
    Child { call: u8, child: u8 },
    /// `paired`.
    Paired { call: u8, reason: u8 },
    /// `suspended`.
    Suspended { calls: Vec<u8> },
    /// `step_commit`.
    Commit { step: u8, checkpoint: u8 },
    /// `run_ended`.
    RunEnded { run: u8, outcome: u8 },
    /// `rewound`.
    Rewound { to: u8 },
    /// `model_aborted`.
    Aborted,
}

fn call_id(n: u8) -> CallId {
    CallId::new(format!("c{}", n % 8))
}

fn checkpoint(n: u8) -> CheckpointId {
    CheckpointId::new(format!("cp{}", n % 6))
}

fn run_id(n: u8) -> RunId {
    RunId::new(format!("r{}", n % 4))
}

fn attempt(n: u8) -> Attempt {
    Attempt(u32::from(n % 6))
}

impl EntrySpec {
    fn entry(self) -> Entry {
        let message = || "change of plan".to_owned();
        match self {
            EntrySpec::Wake => Entry::Wake,
            EntrySpec::Stop => Entry::Stop,
            EntrySpec::Continue => Entry::Resume(ResumeMode::Continue),
            EntrySpec::WithMessage => Entry::Resume(ResumeMode::WithMessage { message: message() }),
            EntrySpec::FromCheckpoint(n) => {
                Entry::Resume(ResumeMode::FromCheckpoint { checkpoint: checkpoint(n) })
            }
            EntrySpec::Retry { checkpoint: c, message: m } => {
                Entry::Retry { checkpoint: c.map(checkpoint), message: m.then(message) }
            }
            EntrySpec::NewTurn => Entry::NewTurn { message: message() },
        }
    }
}

impl CallSpec {
    fn call(self) -> Call {
        let kind = match self.kind % 6 {
            0 => CallKind::Tool,
            1 => CallKind::Client,
            2 => CallKind::Approval,
            3 => CallKind::RemoteAgent,
            4 => CallKind::LocalAgent,
            _ => CallKind::Companion,
        };
        let args = if self.args_bad {
            RawJson::parse(r#"{"scope":null}"#).unwrap_or_default()
        } else {
            RawJson::empty_object()
        };
        Call {
            call: call_id(self.call),
            tool: ToolName::new(format!("t{}", self.tool % TOOLS)),
            args,
            kind,
            replay: if self.safe { Replay::Safe } else { Replay::Unsafe },
            group: self.group.map(|g| format!("g{}", g % 3)),
            sequential: self.sequential,
        }
    }
}

fn reason(n: u8) -> PairReason {
    match n % 4 {
        0 => PairReason::OutcomeUnknown,
        1 => PairReason::ReplayLimitReached,
        2 => PairReason::NotStarted,
        _ => PairReason::RunStopped,
    }
}

fn outcome(n: u8) -> RunOutcome {
    match n % 4 {
        0 => RunOutcome::Completed,
        1 => RunOutcome::Failed,
        2 => RunOutcome::Stopped,
        _ => RunOutcome::Suspended,
    }
}

fn reply(step: u8, cp: u8, calls: &[CallSpec]) -> ReplyCommitted {
    ReplyCommitted {
        step: StepNo(u64::from(step % 6)),
        checkpoint: checkpoint(cp),
        text: String::new(),
        calls: calls.iter().take(8).map(|c| c.call()).collect(),
        metadata: None,
    }
}

impl EventSpec {
    fn push_into(&self, out: &mut Vec<Event>) {
        let e: Event = match self {
            EventSpec::RunStarted { run, entry } => {
                RunStarted { run: run_id(*run), entry: entry.entry(), by: None }.into()
            }
            EventSpec::Message => Message { role: Role::User, text: "hello".into() }.into(),
            EventSpec::Reply { step, checkpoint, calls } => reply(*step, *checkpoint, calls).into(),
            EventSpec::ReplyDispatched { step, checkpoint, calls } => {
                let r = reply(*step, *checkpoint, calls);
                let ids: Vec<CallId> = r.calls.iter().map(|c| c.call.clone()).collect();
                out.push(r.into());
                for id in ids {
                    let dispatch = DispatchId::new(format!("d-{id}"));
                    out.push(DispatchMinted { call: id, dispatch }.into());
                }
                return;
            }
            EventSpec::Dispatch { call, dispatch } => DispatchMinted {
                call: call_id(*call),
                dispatch: DispatchId::new(format!("d{}", dispatch % 3)),
            }
            .into(),
            EventSpec::Attempt { call, attempt: a } => {
                AttemptStarted { call: call_id(*call), attempt: attempt(*a) }.into()
            }
            EventSpec::Chunk { call, attempt: a, text } => OutputChunk {
                call: call_id(*call),
                attempt: attempt(*a),
                text: format!("out{} ", text % 4),
            }
            .into(),
            EventSpec::Result { call, attempt: a, is_error } => ToolResult {
                call: call_id(*call),
                attempt: attempt(*a),
                output: RawJson::null(),
                is_error: *is_error,
                metadata: None,
            }
            .into(),
            EventSpec::Approval { call, approved } => {
                ApprovalDecided { call: call_id(*call), approved: *approved }.into()
            }
            EventSpec::Answer { call } => {
                ClientAnswer { call: call_id(*call), output: RawJson::null() }.into()
            }
            EventSpec::Child { call, child } => ChildAttached {
                call: call_id(*call),
                child: SessionId::from_stored(format!("child-{}", child % 3)),
            }
            .into(),
            EventSpec::Paired { call, reason: r } => {
                let reason = reason(*r);
                Paired {
                    call: call_id(*call),
                    reason,
                    message: reason.model_message().to_owned(),
                    partial: String::new(),
                    rule: None,
                }
                .into()
            }
            EventSpec::Suspended { calls } => {
                Suspended { calls: calls.iter().take(8).map(|c| call_id(*c)).collect() }.into()
            }
            EventSpec::Commit { step, checkpoint: cp } => {
                StepCommit { step: StepNo(u64::from(step % 6)), checkpoint: checkpoint(*cp) }.into()
            }
            EventSpec::RunEnded { run, outcome: o } => {
                RunEnded { run: run_id(*run), outcome: outcome(*o), error: None, by: None }.into()
            }
            EventSpec::Rewound { to } => Rewound { to: checkpoint(*to) }.into(),
            EventSpec::Aborted => {
                ModelAborted { partial: "I was about to".into(), continuation: None }.into()
            }
        };
        out.push(e);
    }
}

impl FoldInput {
    /// The log the input describes.
    pub fn log(&self) -> Vec<Event> {
        let mut events = Vec::new();
        for spec in &self.events {
            if events.len() >= MAX_EVENTS {
                break;
            }
            spec.push_into(&mut events);
        }
        events
    }

    /// The registry the input describes.
    pub fn registry(&self) -> MemoryRegistry {
        let mut registry = MemoryRegistry::new();
        for (i, spec) in self.tools.iter().enumerate() {
            let name = format!("t{i}");
            registry = match spec {
                ToolSpec::Safe => registry.with_tool(name, Replay::Safe),
                ToolSpec::Unsafe => registry.with_tool(name, Replay::Unsafe),
                ToolSpec::Rejecting => {
                    registry.with_rejecting_tool(name, Replay::Safe, "the schema now needs `x`")
                }
                ToolSpec::Removed => registry,
            };
        }
        registry
    }
}

fn new_run(entry: Entry, n: usize) -> NewRun {
    NewRun {
        run: RunId::new(format!("r-new-{n}")),
        entry,
        commit_checkpoint: CheckpointId::new(format!("cp-new-{n}")),
    }
}

/// Every call id of the log is in exactly one reply (so an id names one call).
fn call_ids_unique(events: &[Event]) -> bool {
    let mut seen = std::collections::BTreeSet::new();
    events.iter().all(|e| match e {
        Event::ReplyCommitted(r) => r.calls.iter().all(|c| seen.insert(c.call.clone())),
        _ => true,
    })
}

/// Folds the log and plans the entries: no panic; the fold is the same however it is fed; the
/// plan is deterministic and keeps [`check_plan`]'s invariants; after a redirect or a stop closed
/// a step, no later entry starts work for a call of that step.
pub fn check_fold_and_plan(input: &FoldInput) -> Result<(), String> {
    let config = match input.max_bodies % 5 {
        0 => {
            ensure!(Config::new(0).is_err(), "max_bodies 0 was accepted");
            Config::default()
        }
        n => Config::new(u32::from(n)).map_err(|e| format!("max_bodies {n} refused: {e}"))?,
    };
    let registry = input.registry();
    let mut events = input.log();

    let state = fold(&events);
    ensure!(fold_owned(events.clone()) == state, "fold_owned differs from fold");
    let half = events.len() / 2;
    let mut resumed = fold(events.get(..half).unwrap_or_default());
    for e in events.get(half..).unwrap_or_default() {
        resumed.apply(e);
    }
    ensure!(resumed == state, "folding in two parts differs from folding at once");
    let _ = verify(&events);
    let _ = transcript(&state);
    snapshot_fold_agrees(input, &events, &registry, &config)?;
    fork_fold_agrees(input, &events, &registry, &config)?;
    trim_fold_agrees(input, &events, &registry, &config)?;

    let mut closed: Vec<CallId> = Vec::new();
    let ids_unique = call_ids_unique(&events);
    let entries = std::iter::once(input.entry).chain(input.later.iter().copied().take(MAX_LATER));
    for (n, spec) in entries.enumerate() {
        let entry = spec.entry();
        let state: SessionState = fold(&events);
        let run = new_run(entry.clone(), n);
        let p = plan(&state, &run, &registry, &config);
        ensure!(p == plan(&state, &run, &registry, &config), "the plan is not deterministic");
        check_plan(&state, &p, &entry, &registry, &config)
            .map_err(|e| format!("entry {n} ({entry:?}) over {} events: {e}", events.len()))?;
        if ids_unique {
            for decision in &p.calls {
                ensure!(
                    !(closed.contains(&decision.call) && decision.action.starts_work()),
                    "entry {n} ({entry:?}) starts work for {} of a step a redirect or stop \
                     closed: {decision:?}",
                    decision.call
                );
            }
        }
        if p.error.is_none() && p.step.is_some() {
            let closes =
                matches!(entry, Entry::Stop | Entry::Resume(ResumeMode::WithMessage { .. }));
            if closes {
                closed.extend(p.calls.iter().map(|c| c.call.clone()));
            }
        }
        events.extend(p.appends.iter().cloned());
    }
    Ok(())
}

/// How many committed step boundaries of a log a snapshot is taken at.
const SNAPSHOT_BOUNDARIES: usize = 3;

/// The snapshot property over the input's log: at up to `SNAPSHOT_BOUNDARIES` committed step
/// boundaries, a fold from the snapshot plans every entry as the whole fold does, at every
/// longer prefix (the input's entries, and one of each kind naming the log's checkpoints).
pub fn snapshot_fold_agrees(
    input: &FoldInput,
    events: &[Event],
    registry: &MemoryRegistry,
    config: &Config,
) -> Result<Agreement, String> {
    let kinds = [
        EntrySpec::Wake,
        EntrySpec::Stop,
        EntrySpec::Retry { checkpoint: None, message: false },
        EntrySpec::FromCheckpoint(0),
        EntrySpec::FromCheckpoint(3),
        EntrySpec::Retry { checkpoint: Some(1), message: true },
    ];
    let entries = entries_with(input, kinds);
    snapshots_agree(events, &entries, registry, config, SNAPSHOT_BOUNDARIES)
        .map_err(|e| format!("a fold from a snapshot plans otherwise: {e}"))
}

/// The input's entry and its later ones (at most `MAX_LATER`), then `kinds`, each a new run.
fn entries_with(input: &FoldInput, kinds: impl IntoIterator<Item = EntrySpec>) -> Vec<NewRun> {
    std::iter::once(input.entry)
        .chain(input.later.iter().copied().take(MAX_LATER))
        .chain(kinds)
        .enumerate()
        .map(|(n, spec)| new_run(spec.entry(), n))
        .collect()
}

/// The entries a fork and a trim are planned with beside the input's own: every kind, a
/// checkpoint the fold may or may not place, a retry naming one with a message.
const FORK_AND_TRIM_KINDS: [EntrySpec; 7] = [
    EntrySpec::Wake,
    EntrySpec::Stop,
    EntrySpec::Continue,
    EntrySpec::WithMessage,
    EntrySpec::Retry { checkpoint: None, message: false },
    EntrySpec::FromCheckpoint(0),
    EntrySpec::Retry { checkpoint: Some(1), message: true },
];

/// How many committed steps of a log a fork is made at.
const FORK_POINTS: usize = 3;

/// The snapshot property for forks over the input's log: forked at up to `FORK_POINTS`
/// committed steps, the fork's whole fold and its fold from its snapshot plan alike, and as the
/// original at the same point, right after the fork and as the original's events go on
/// ([`forks_agree`]).
pub fn fork_fold_agrees(
    input: &FoldInput,
    events: &[Event],
    registry: &MemoryRegistry,
    config: &Config,
) -> Result<Agreement, String> {
    let entries = entries_with(input, FORK_AND_TRIM_KINDS);
    forks_agree(events, &entries, registry, config, FORK_POINTS)
        .map_err(|e| format!("a fork plans otherwise: {e}"))
}

/// How many places of a log a trim is tried at.
const TRIM_POINTS: usize = 3;

/// The snapshot property for trims over the input's log: trimmed where `trim_point` allows at
/// up to `TRIM_POINTS` places, the kept log plans every entry as the whole one, then and as the
/// log goes on ([`trims_agree`]).
pub fn trim_fold_agrees(
    input: &FoldInput,
    events: &[Event],
    registry: &MemoryRegistry,
    config: &Config,
) -> Result<Agreement, String> {
    let entries = entries_with(input, FORK_AND_TRIM_KINDS);
    trims_agree(events, &entries, registry, config, TRIM_POINTS)
        .map_err(|e| format!("a trimmed log plans otherwise: {e}"))
}
