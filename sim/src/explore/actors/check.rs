//! The invariants of several actors at once, checked on every state the search reaches: the
//! simulator's (no unsafe body twice, at most `max_bodies`, each call answered once, nothing
//! acknowledged lost, fenced writes never landing, `recovery::verify`), and at most one live
//! run per session, no run ended twice (a suspended end followed by a stop aside), no session
//! woken after another actor completed it with nothing landed in between, every call of a
//! committed step answered, a decision never applied to an attempt its decider did not see,
//! and no actor waiting on nothing.

use std::collections::{BTreeMap, BTreeSet};

use stepjournal_codec::{Entry, Event, Record, Replay, RunOutcome};
use stepjournal_recovery::verify;

use super::store::Landed;
use super::world::World;
use crate::Violation;

/// `max_bodies` of every actor's journal.
pub(crate) const MAX_BODIES: usize = 2;

fn broke(rule: &'static str, what: String) -> Violation {
    Violation::Actors { rule, what }
}

/// Every invariant the world breaks now.
pub(crate) fn check(world: &World) -> Vec<Violation> {
    let mut out = Vec::new();
    let logs = world.shared.logs();
    let landed = world.shared.landed();
    let deletes = world.shared.deletes();
    for (session, log) in &logs {
        let events: Vec<Event> = log.iter().map(|r| r.event.clone()).collect();
        for finding in verify(&events) {
            out.push(broke("the log verifies", format!("session {session}: {finding:?}")));
        }
        bodies(&events, &mut out);
        ends(&events, &mut out);
        steps(&events, &mut out);
    }
    effects(world, &mut out);
    for (session, at, events, deletes_before) in world.shared.acked() {
        if deletes_before != deletes {
            continue;
        }
        let log = logs.iter().find(|(s, _)| *s == session).map(|(_, l)| l.as_slice());
        let start = usize::try_from(at.get()).unwrap_or(usize::MAX);
        let kept = log.and_then(|l| l.get(start..)).is_some_and(|rest| {
            rest.len() >= events.len() && rest.iter().zip(&events).all(|(r, e)| &r.event == e)
        });
        if !kept {
            out.push(broke("nothing acknowledged lost", format!("session {session} seq {at}")));
        }
    }
    fenced(world, &landed, &mut out);
    for taken in world.shared.taken() {
        if let (false, Some((lease, true))) = (taken.forced, &taken.replaced) {
            out.push(broke(
                "at most one live run per session",
                format!(
                    "{} took the lease of session {} from {}'s run {}, live by the store's clock",
                    world.name(taken.actor.0),
                    taken.session,
                    lease.owner,
                    lease.run
                ),
            ));
        }
    }
    for batch in landed.iter().filter(|b| b.deletes_before == deletes) {
        let log = logs.iter().find(|(s, _)| *s == batch.session).map(|(_, l)| l.as_slice());
        woken_after_end(world, batch, log.unwrap_or(&[]), &mut out);
        decided_unseen(world, batch, log.unwrap_or(&[]), &mut out);
    }
    for actor in &world.actors {
        if actor.is_stuck(&world.shared) {
            out.push(broke("no actor waits on nothing", format!("{} never finishes", actor.name)));
        }
    }
    out
}

/// No unsafe call starts two bodies; no call more than `max_bodies`.
fn bodies(events: &[Event], out: &mut Vec<Violation>) {
    let mut policy = BTreeMap::new();
    let mut started: BTreeMap<String, usize> = BTreeMap::new();
    for event in events {
        match event {
            Event::ReplyCommitted(r) => {
                for c in &r.calls {
                    policy.insert(c.call.to_string(), c.replay);
                }
            }
            Event::AttemptStarted(a) => *started.entry(a.call.to_string()).or_default() += 1,
            _ => {}
        }
    }
    for (call, n) in started {
        if n > 1 && policy.get(&call) != Some(&Replay::Safe) {
            out.push(broke("no unsafe body twice", format!("call {call} started {n} bodies")));
        }
        if n > MAX_BODIES {
            out.push(broke("at most max_bodies", format!("call {call} started {n} bodies")));
        }
    }
}

/// The effects the tools performed: an unsafe one's at most once per dispatch id.
fn effects(world: &World, out: &mut Vec<Violation>) {
    let effects = world.effects.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut by: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (tool, dispatch, _) in effects {
        *by.entry((tool, dispatch)).or_default() += 1;
    }
    for ((tool, dispatch), n) in by {
        let safe = tool == super::actor::TOOL && world.replay == Replay::Safe;
        if n > 1 && !safe {
            out.push(broke(
                "no unsafe body twice",
                format!("unsafe tool {tool} ran {n} times under dispatch {dispatch}"),
            ));
        }
    }
}

/// No run ends twice, unless its first end was `suspended`.
fn ends(events: &[Event], out: &mut Vec<Violation>) {
    let mut first: BTreeMap<String, RunOutcome> = BTreeMap::new();
    for event in events {
        if let Event::RunEnded(e) = event {
            match first.get(e.run.as_str()) {
                Some(RunOutcome::Suspended) => {
                    first.insert(e.run.to_string(), e.outcome);
                }
                Some(outcome) => out.push(broke(
                    "no run ended twice",
                    format!(
                        "run {} ended {} after it ended {}",
                        e.run,
                        e.outcome.as_str(),
                        outcome.as_str()
                    ),
                )),
                None => {
                    first.insert(e.run.to_string(), e.outcome);
                }
            }
        }
    }
}

/// Every call of a committed step is answered before its `step_commit`, and no reply is
/// committed while the step before it is open.
fn steps(events: &[Event], out: &mut Vec<Violation>) {
    let mut open: Option<(u64, Vec<String>)> = None;
    let mut resolved: BTreeSet<String> = BTreeSet::new();
    for event in events {
        match event {
            Event::ReplyCommitted(r) => {
                if let Some((step, _)) = &open {
                    out.push(broke(
                        "every call of a committed step answered",
                        format!("step {} committed over step {step}, still open", r.step.get()),
                    ));
                }
                open = Some((r.step.get(), r.calls.iter().map(|c| c.call.to_string()).collect()));
            }
            Event::ToolResult(e) => {
                resolved.insert(e.call.to_string());
            }
            Event::ClientAnswer(e) => {
                resolved.insert(e.call.to_string());
            }
            Event::ApprovalDecided(e) if !e.approved => {
                resolved.insert(e.call.to_string());
            }
            Event::Paired(e) => {
                resolved.insert(e.call.to_string());
            }
            Event::StepCommit(c) => {
                if let Some((step, calls)) = open.take() {
                    let unanswered: Vec<&String> =
                        calls.iter().filter(|c| !resolved.contains(*c)).collect();
                    if step == c.step.get() && !unanswered.is_empty() {
                        out.push(broke(
                            "every call of a committed step answered",
                            format!("step {step} committed with {unanswered:?} unanswered"),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
}

/// Every batch that is no entry's (a `run_started`, or the operator's stop) is written by the
/// actor whose run began last, while that run has not ended: a fenced write never lands.
fn fenced(world: &World, landed: &[Landed], out: &mut Vec<Violation>) {
    // Per session: the actor of its last run, whether that run ended, the deletes then.
    let mut current: BTreeMap<String, (usize, bool, usize)> = BTreeMap::new();
    for batch in landed {
        let key = batch.session.to_string();
        if current.get(&key).is_some_and(|c| c.2 != batch.deletes_before) {
            current.remove(&key);
        }
        let ends = batch.events.iter().any(|e| matches!(e, Event::RunEnded(_)));
        if matches!(batch.events.first(), Some(Event::RunStarted(_))) {
            current.insert(key, (batch.actor.0, ends, batch.deletes_before));
            continue;
        }
        if batch.during == "stop" {
            if let Some(c) = current.get_mut(&key) {
                c.1 = true;
            }
            continue;
        }
        match current.get_mut(&key) {
            Some(c) if c.0 == batch.actor.0 && !c.1 => c.1 = ends,
            _ => out.push(broke(
                "fenced writes never land",
                format!(
                    "{}'s {} landed at seq {} of session {} over a run that is not its own or ended",
                    world.name(batch.actor.0),
                    batch.during,
                    batch.at,
                    batch.session
                ),
            )),
        }
    }
}

/// A start-up's wake never lands right after a run that ended completed, failed or stopped.
fn woken_after_end(world: &World, batch: &Landed, log: &[Record], out: &mut Vec<Violation>) {
    let wake = matches!(batch.events.first(), Some(Event::RunStarted(e)) if e.entry == Entry::Wake);
    if batch.during != "recover" || !wake || batch.at.get() == 0 {
        return;
    }
    let before = usize::try_from(batch.at.get() - 1).ok().and_then(|i| log.get(i));
    if let Some(Event::RunEnded(e)) = before.map(|r| &r.event)
        && e.outcome != RunOutcome::Suspended
    {
        out.push(broke(
            "no session woken after another actor completed it",
            format!(
                "{}'s start-up woke session {} at seq {} right after run {} ended {}",
                world.name(batch.actor.0),
                batch.session,
                batch.at,
                e.run,
                e.outcome.as_str()
            ),
        ));
    }
}

/// An answer or a decision lands only where no run began or ended since its decider read the
/// session.
fn decided_unseen(world: &World, batch: &Landed, log: &[Record], out: &mut Vec<Violation>) {
    let decision = batch
        .events
        .iter()
        .any(|e| matches!(e, Event::ClientAnswer(_) | Event::ApprovalDecided(_)));
    let (read, deletes) = batch.began_at;
    if !decision || deletes != batch.deletes_before || read >= batch.at {
        return;
    }
    let from = usize::try_from(read.get()).unwrap_or(usize::MAX);
    let to = usize::try_from(batch.at.get()).unwrap_or(usize::MAX);
    let between = log.get(from..to).unwrap_or(&[]);
    if let Some(r) =
        between.iter().find(|r| matches!(r.event, Event::RunStarted(_) | Event::RunEnded(_)))
    {
        out.push(broke(
            "a decision applies to what its decider saw",
            format!(
                "{}'s {} read session {} at seq {read} and landed at seq {} over the {} at seq {}",
                world.name(batch.actor.0),
                batch.during,
                batch.session,
                batch.at,
                r.event.kind().name(),
                r.seq
            ),
        ));
    }
}
