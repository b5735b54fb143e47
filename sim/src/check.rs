//! The invariants a simulation must keep, checked on what it left: the journal, the ledger,
//! the acknowledged appends and the fenced writes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use stepjournal_codec::{
    Attempt, Call, CallId, CallKind, DispatchId, Event, Record, Replay, RunOutcome, Seq, SessionId,
    StepNo,
};
use stepjournal_recovery::order::{Blocking, behind, blocking};
use stepjournal_recovery::{CallRecord, Config, SessionState, TranscriptItem, transcript, verify};

use super::ledger::LedgerEntry;
use super::store::Acked;
use super::violation::Violation;

/// A write a body tried after its run was fenced (a newer run began, or a stop landed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencedWrite {
    /// The call.
    pub call: CallId,
    /// The body's attempt.
    pub attempt: Attempt,
    /// The event the write would have appended (an `output_chunk` or a `tool_result`).
    pub event: Event,
    /// Whether the writer accepted it (it must not have).
    pub accepted: bool,
}

/// Everything [`check`] looks at: one session's log as read back from the store, and what
/// the simulation recorded outside it.
#[derive(Debug, Clone)]
pub struct History {
    /// The session.
    pub session: SessionId,
    /// Its log, read back from the store.
    pub log: Vec<Record>,
    /// The ledger, in the order things happened.
    pub ledger: Vec<LedgerEntry>,
    /// Every append a store acknowledged.
    pub acked: Vec<Acked>,
    /// Every write a fenced body tried.
    pub fenced: Vec<FencedWrite>,
    /// Recovery's settings (`max_bodies`).
    pub config: Config,
    /// Whether the session is over: its last run completed or was stopped. Then every call must
    /// have its answer; otherwise (after a crash) only the calls of closed steps must.
    pub ended: bool,
}

/// Checks every invariant on `history`; an empty list means none was broken.
///
/// - No body of an unsafe call (kind `tool`, `approval` or `local_agent`) starts twice for one
///   dispatch id, and its effect is performed by one body at most (ledger).
/// - Every effect follows its body's start (ledger order), and every started body's
///   `attempt_started` and reply are in the log; a call keeps one dispatch id.
/// - No call starts more than `max_bodies` bodies (log and ledger).
/// - Every call has at most one answer that counts; every call of a closed step (of every step,
///   once the session `ended`) has one in `recovery::transcript`.
/// - Nothing acknowledged is lost: every acknowledged append is in the log where it landed.
/// - The order rules hold: when a body's `attempt_started` was appended, every call it is
///   behind (same group, or both sequential) was resolved, neither paired in doubt nor denied;
///   and the ledger never shows a body start before the body whose result resolved a call it
///   is behind had ended.
/// - Nothing runs after a redirect or a stop closed its step (log, and ledger order).
/// - A fenced writer's writes were refused and are not in the log.
/// - `recovery::verify` finds nothing.
pub fn check(history: &History) -> Vec<Violation> {
    let mut out = Vec::new();
    let events: Vec<Event> = history.log.iter().map(|r| r.event.clone()).collect();
    out.extend(verify(&events).into_iter().map(Violation::Protocol));
    check_acked(history, &mut out);
    let state = walk_log(history, &mut out);
    check_answers(history, &state, &mut out);
    check_ledger(history, &state, &mut out);
    check_fenced(history, &mut out);
    out
}

fn check_acked(history: &History, out: &mut Vec<Violation>) {
    for acked in history.acked.iter().filter(|a| a.session == history.session) {
        for (i, event) in acked.events.iter().enumerate() {
            let seq = acked.first.add(i as u64);
            let found = usize::try_from(seq.get()).ok().and_then(|i| history.log.get(i));
            if found.map(|r| &r.event) != Some(event) {
                out.push(Violation::AckedLost {
                    session: acked.session.clone(),
                    seq,
                    expected: event.kind(),
                    found: found.map(|r| r.event.kind()),
                });
                break;
            }
        }
    }
}

/// The call an event names, for the events a body writes.
fn body_write(event: &Event) -> Option<&CallId> {
    match event {
        Event::AttemptStarted(e) => Some(&e.call),
        Event::OutputChunk(e) => Some(&e.call),
        Event::ToolResult(e) => Some(&e.call),
        _ => None,
    }
}

/// What holds `ahead` back for the calls behind it, if anything.
fn holds(ahead: &CallRecord<'_>) -> Option<String> {
    if !ahead.is_resolved() {
        return Some("was unresolved".to_owned());
    }
    match blocking(ahead, true)? {
        Blocking::ApprovalDenied => Some("had its approval denied".to_owned()),
        Blocking::Paired(reason) => Some(format!("was paired `{}`", reason.as_str())),
    }
}

/// Folds the log, checking each body write against the state just before it. Returns the
/// final state.
fn walk_log(history: &History, out: &mut Vec<Violation>) -> SessionState {
    let max = history.config.max_bodies();
    let mut state = SessionState::default();
    let mut over_max = HashSet::new();
    for record in &history.log {
        if let Some(id) = body_write(&record.event)
            && let Some(call) = state.call(id)
        {
            let step = call.step();
            if state.is_committed(step) {
                out.push(Violation::RanAfterClose {
                    call: id.clone(),
                    step,
                    seq: record.seq,
                    what: record.event.kind(),
                });
            }
            if let Event::AttemptStarted(e) = &record.event {
                if call.bodies() >= max && over_max.insert((step, id.clone())) {
                    out.push(Violation::TooManyBodies {
                        call: id.clone(),
                        bodies: call.bodies().saturating_add(1),
                        max,
                    });
                }
                check_order(&state, &call, e.attempt, record.seq, out);
            }
        }
        state.apply(&record.event);
    }
    state
}

fn check_order(
    state: &SessionState,
    call: &CallRecord<'_>,
    attempt: Attempt,
    seq: Seq,
    out: &mut Vec<Violation>,
) {
    let Some(reply) = state.replies().iter().find(|r| r.seq == call.reply_seq()) else {
        return;
    };
    let calls = state.calls_of(reply);
    let Some(index) = calls.iter().position(|c| c.id() == call.id()) else {
        return;
    };
    for (ahead, lane) in behind(&calls, index) {
        if let Some(why) = holds(ahead) {
            out.push(Violation::OrderBroken {
                call: call.id().clone(),
                attempt,
                seq,
                ahead: ahead.id().clone(),
                order: lane.to_string(),
                why,
            });
        }
    }
}

fn check_answers(history: &History, state: &SessionState, out: &mut Vec<Violation>) {
    // Answers shown, per reply (by its seq) and call.
    let mut shown: HashMap<(Seq, &CallId), usize> = HashMap::new();
    let mut reply_seq = None;
    let items = transcript(state);
    for item in &items {
        match item {
            TranscriptItem::Reply { seq, .. } => reply_seq = Some(*seq),
            TranscriptItem::ToolResult { call, .. }
            | TranscriptItem::ClientAnswer { call, .. }
            | TranscriptItem::ApprovalDenied { call, .. }
            | TranscriptItem::Paired { call, .. } => {
                if let Some(seq) = reply_seq {
                    *shown.entry((seq, call)).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    for reply in state.replies() {
        let closed = state.is_committed(reply.step);
        for call in state.calls_of(reply) {
            let counting = call.results().count()
                + call.answers().count()
                + call.approvals().filter(|a| !a.approved).count()
                + call.counting_pairings().count();
            if counting > 1 {
                out.push(Violation::AnsweredTwice { call: call.id().clone(), answers: counting });
            }
            let answers = shown.get(&(reply.seq, call.id())).copied().unwrap_or(0);
            if answers > 1 {
                out.push(Violation::AnsweredTwice { call: call.id().clone(), answers });
            }
            if answers == 0 && (closed || history.ended) {
                let when = if closed { "although its step is closed" } else { "at the end" };
                out.push(Violation::Unanswered { call: call.id().clone(), step: reply.step, when });
            }
        }
    }
    if history.ended {
        let outcome = state.last_run_outcome();
        if !matches!(outcome, Some(RunOutcome::Completed | RunOutcome::Stopped)) {
            let how = outcome.map_or("has not ended", RunOutcome::as_str);
            out.push(Violation::NotEnded { why: format!("its last run {how}") });
        } else if let Some(reply) = state.saved_step() {
            out.push(Violation::NotEnded { why: format!("step {} is still open", reply.step) });
        }
    }
}

/// A call as the log's replies hold it, by step and id.
fn calls_by_step(state: &SessionState) -> HashMap<(StepNo, &CallId), (&Call, CallRecord<'_>)> {
    let mut calls = HashMap::new();
    for reply in state.replies() {
        for record in state.calls_of(reply) {
            calls.insert((reply.step, record.id()), (record.call(), record));
        }
    }
    calls
}

/// An unsafe call runs one body at most: its saved policy is unsafe and its bodies are its own
/// (a remote sub-agent's or a companion's effects are its child's, started once per dispatch
/// id; re-attaching to the child starts no body, so the ledger records no body start for it).
fn runs_once(call: &Call) -> bool {
    call.replay == Replay::Unsafe && !has_child(call.kind)
}

/// Whether a call of `kind` works through a child started once per dispatch id (a remote
/// sub-agent, a companion): its bodies perform no effect of their own.
pub(crate) fn has_child(kind: CallKind) -> bool {
    matches!(kind, CallKind::RemoteAgent | CallKind::Companion)
}

/// A body of `call` starting (in ledger order): each call it is behind whose result resolved
/// it must have had the body that produced that result end first, if the ledger saw that body
/// start.
fn check_ahead_ended(
    state: &SessionState,
    (step, call, attempt): (StepNo, &CallId, Attempt),
    started: &HashSet<(StepNo, &CallId, Attempt)>,
    ended: &HashSet<(StepNo, &CallId, Attempt)>,
    out: &mut Vec<Violation>,
) {
    let Some(reply) = state.replies().iter().find(|r| r.step == step) else { return };
    let calls = state.calls_of(reply);
    let Some(index) = calls.iter().position(|c| c.id() == call) else { return };
    for (ahead, _lane) in behind(&calls, index) {
        let Some(result) = ahead.results().next() else { continue };
        let key = (step, ahead.id(), result.attempt);
        if started.contains(&key) && !ended.contains(&key) {
            out.push(Violation::StartedBeforeAheadEnded {
                call: call.clone(),
                attempt,
                ahead: ahead.id().clone(),
                ahead_attempt: result.attempt,
            });
        }
    }
}

fn check_ledger(history: &History, state: &SessionState, out: &mut Vec<Violation>) {
    let calls = calls_by_step(state);
    let max = history.config.max_bodies();
    let mut started: HashSet<(StepNo, &CallId, Attempt)> = HashSet::new();
    let mut bodies: BTreeMap<(StepNo, &CallId), BTreeMap<&DispatchId, usize>> = BTreeMap::new();
    let mut effects: BTreeMap<(StepNo, &CallId, &DispatchId), BTreeSet<Attempt>> = BTreeMap::new();
    let mut dispatches: BTreeMap<(StepNo, &CallId), BTreeSet<&DispatchId>> = BTreeMap::new();
    let mut closed: HashMap<StepNo, &'static str> = HashMap::new();
    let mut ended: HashSet<(StepNo, &CallId, Attempt)> = HashSet::new();
    for entry in &history.ledger {
        if let (Some((step, call)), Some(dispatch)) = (entry.call(), entry.dispatch()) {
            dispatches.entry((step, call)).or_default().insert(dispatch);
        }
        match entry {
            LedgerEntry::BodyStarted { step, call, dispatch, attempt } => {
                started.insert((*step, call, *attempt));
                check_ahead_ended(state, (*step, call, *attempt), &started, &ended, out);
                *bodies.entry((*step, call)).or_default().entry(dispatch).or_default() += 1;
                if let Some(entry) = closed.get(step) {
                    out.push(Violation::StartedAfterClose {
                        call: call.clone(),
                        attempt: *attempt,
                        step: *step,
                        entry,
                    });
                }
                match calls.get(&(*step, call)) {
                    None => {
                        out.push(Violation::BodyWithoutReply { step: *step, call: call.clone() })
                    }
                    Some((_, record)) if !record.attempts().any(|a| a.attempt == *attempt) => {
                        out.push(Violation::BodyNotInLog { call: call.clone(), attempt: *attempt })
                    }
                    Some(_) => {}
                }
            }
            LedgerEntry::Effect { step, call, dispatch, attempt, .. } => {
                if !started.contains(&(*step, call, *attempt)) {
                    out.push(Violation::EffectWithoutBody {
                        call: call.clone(),
                        attempt: *attempt,
                    });
                }
                effects.entry((*step, call, dispatch)).or_default().insert(*attempt);
            }
            LedgerEntry::BodyEnded { step, call, attempt, .. } => {
                ended.insert((*step, call, *attempt));
            }
            LedgerEntry::ChildStarted { .. } => {}
            LedgerEntry::StepClosed { step, entry } => {
                closed.entry(*step).or_insert(entry);
            }
        }
    }
    for ((step, call), per_dispatch) in &bodies {
        let total: usize = per_dispatch.values().sum();
        let in_log = calls.get(&(*step, *call)).map_or(0, |(_, r)| r.bodies() as usize);
        if total > max as usize && in_log <= max as usize {
            out.push(Violation::TooManyBodies {
                call: (*call).clone(),
                bodies: u32::try_from(total).unwrap_or(u32::MAX),
                max,
            });
        }
        let once = calls.get(&(*step, *call)).is_some_and(|(c, _)| runs_once(c));
        for (dispatch, n) in per_dispatch {
            if once && *n > 1 {
                out.push(Violation::UnsafeBodyTwice {
                    call: (*call).clone(),
                    dispatch: (*dispatch).clone(),
                    bodies: *n,
                });
            }
        }
    }
    for ((step, call, dispatch), attempts) in &effects {
        let once = calls.get(&(*step, *call)).is_some_and(|(c, _)| runs_once(c));
        if once && attempts.len() > 1 {
            out.push(Violation::UnsafeEffectTwice {
                call: (*call).clone(),
                dispatch: (*dispatch).clone(),
                attempts: attempts.iter().copied().collect(),
            });
        }
    }
    for ((step, call), mut seen) in dispatches {
        if let Some(minted) = calls.get(&(step, call)).and_then(|(_, r)| r.dispatch()) {
            seen.insert(minted);
        }
        if seen.len() > 1 {
            out.push(Violation::DispatchChanged {
                call: call.clone(),
                dispatches: seen.into_iter().cloned().collect(),
            });
        }
    }
}

fn check_fenced(history: &History, out: &mut Vec<Violation>) {
    for write in &history.fenced {
        let what = write.event.kind();
        if write.accepted {
            out.push(Violation::FencedWriteAccepted {
                call: write.call.clone(),
                attempt: write.attempt,
                what,
            });
        }
        if let Some(record) = history.log.iter().find(|r| r.event == write.event) {
            out.push(Violation::FencedWriteLanded {
                call: write.call.clone(),
                attempt: write.attempt,
                what,
                seq: record.seq,
            });
        }
    }
}
