//! What each earlier entry decided for the calls of the step it found open: the library's plan
//! for the run's recorded entry over the log as it stood when the run began (the fold of the
//! events before its `run_started`), each tool taken with its call's saved policy. A decision is
//! shown only where the log bears it out (a pairing recorded with the same reason and rule, a
//! body started as the attempt planned); where the registry of the time decided otherwise, the
//! recorded pairing is what the page shows, not this.

use std::collections::HashMap;

use stepjournal_codec::{Attempt, CallId, CheckpointId, Event, Record, RunStarted};
use stepjournal_recovery::{Action, CallPlan, Config, NewRun, SessionState, plan};

use crate::plan::{SavedPolicies, action_text};

/// One call's decision by one earlier entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Decided {
    /// The seq of the run's `run_started`.
    pub(super) run_seq: u64,
    /// The entry's kind (`wake`, `resume`, `retry`, `new_turn`).
    pub(super) entry: String,
    pub(super) action: &'static str,
    pub(super) text: String,
    pub(super) rule: &'static str,
}

/// Every earlier entry's decisions that the log bears out, by (reply seq, call id).
pub(super) fn decided(records: &[Record]) -> HashMap<(u64, CallId), Vec<Decided>> {
    let events: Vec<Event> = records.iter().map(|r| r.event.clone()).collect();
    let mut out: HashMap<(u64, CallId), Vec<Decided>> = HashMap::new();
    // The log folded up to the event at hand, one event at a time.
    let mut state = SessionState::default();
    for (at, event) in events.iter().enumerate() {
        if let Event::RunStarted(started) = event {
            decide_run(&mut out, &state, started, &events, at);
        }
        state.apply(event);
    }
    out
}

/// The decisions of the run begun at `at` by `started`, over `state` (the log before it), that
/// the log bears out.
fn decide_run(
    out: &mut HashMap<(u64, CallId), Vec<Decided>>,
    state: &SessionState,
    started: &RunStarted,
    events: &[Event],
    at: usize,
) {
    let Some(reply) = state.saved_step() else { return };
    let new_run = NewRun {
        run: started.run.clone(),
        entry: started.entry.clone(),
        commit_checkpoint: CheckpointId::new("(minted by the writer)"),
    };
    let planned = plan(state, &new_run, &SavedPolicies::of(state), &Config::default());
    if planned.error.is_some() {
        return;
    }
    // The run's events: to the next run's `run_started`.
    let rest = events.get(at..).unwrap_or_default();
    let end = rest.iter().skip(1).position(|e| matches!(e, Event::RunStarted(_)));
    let after = rest.get(..end.map_or(rest.len(), |e| e + 1)).unwrap_or_default();
    let entry = serde_json::to_value(&started.entry)
        .ok()
        .and_then(|v| v.get("kind")?.as_str().map(str::to_owned))
        .unwrap_or_default();
    for c in &planned.calls {
        if borne_out(c, after, state) {
            out.entry((reply.seq.get(), c.call.clone())).or_default().push(Decided {
                run_seq: at as u64,
                entry: entry.clone(),
                action: c.action.name(),
                text: action_text(&c.action),
                rule: c.rule.id,
            });
        }
    }
}

/// Whether the events from the run's `run_started` on bear the decision out: a pairing is
/// recorded in the run's first batch with the planned reason and rule; a body started as the
/// planned attempt; a kept or awaited call is as the fold left it.
fn borne_out(c: &CallPlan, after: &[Event], state: &SessionState) -> bool {
    match &c.action {
        Action::Pair { reason } => after
            .iter()
            .skip(1)
            .take_while(|e| matches!(e, Event::Paired(_) | Event::Rewound(_)))
            .any(|e| {
                matches!(e, Event::Paired(p) if p.call == c.call && p.reason == *reason
                    && p.rule.as_deref() == Some(c.rule.id))
            }),
        Action::Run { attempt, .. } => started(after, &c.call, *attempt),
        Action::Keep | Action::Await => state.call(&c.call).is_some(),
        Action::Reattach { .. } | Action::StartChild { .. } | Action::ReenterChild { .. } => false,
    }
}

fn started(after: &[Event], call: &CallId, attempt: Attempt) -> bool {
    after
        .iter()
        .any(|e| matches!(e, Event::AttemptStarted(a) if &a.call == call && a.attempt == attempt))
}
