//! The scopes: which script variants the explorer searches, and how many faults each execution
//! takes. The full product of kinds, policies, orders, `max_bodies`, steps and runners is out of
//! reach; the scopes cut it with symmetry (calls that differ only in name are one; every call
//! of a reply shares the order attribute) and by dropping attributes a kind cannot read.
//!
//! A call's shapes ([`shapes`]): a `tool` and an approved `approval` in every pair of saved
//! policy (safe, unsafe) and tool now (safe, unsafe, removed, arguments failing); a denied
//! approval and a `client` call once (they read neither); `remote_agent` and `local_agent` with
//! the tool present, removed or failing its arguments (they read no policy); a `companion`
//! present or removed (it is re-entered whatever the registry says). 26 shapes.

use std::fmt;
use std::str::FromStr;

use stepjournal_codec::{CallKind, Replay};

use super::choice::{Job, Menu};
use super::variant::{Answers, CallShape, Now, Order, Runner, Variant};

/// A scope of the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// What CI runs on the debug build.
    Ci,
    /// The deep scope, for a release build.
    Deep,
    /// The deep scope's suspensions and three-call replies, bounded (one fault where the deep
    /// scope takes two, on the pairs and triples): a release run that finishes.
    Three,
}

impl Scope {
    /// The variants searched, smallest first, each with the faults its executions take.
    pub fn jobs(self) -> Vec<Job> {
        match self {
            Scope::Ci => ci(),
            Scope::Deep => deep(),
            Scope::Three => three(),
        }
    }

    /// What the scope covers, for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Scope::Ci => CI_COVERS,
            Scope::Deep => DEEP_COVERS,
            Scope::Three => THREE_COVERS,
        }
    }
}

const CI_COVERS: &str = "\
scope ci (a fault is any append fault: a crash whose batch landed or was lost, a store failure \
that poisons or not; or a body fault at any of 4 points: a crash, the run abandoned with the \
body writing late, the run failed; each followed by any of the 9 entries):
  - 1 call of every shape (every kind but companion, with each saved and current policy pair \
it reads: safe/unsafe saved; safe, unsafe, removed or arguments failing now; approvals granted \
or denied), max_bodies 2, the step runner: 1 fault;
  - max_bodies 1: the shapes that can run a body again (saved safe) and remote sub-agents;
  - through the tool executor (drive), max_bodies 2: every tool shape and one of each other \
kind, and a remote sub-agent and a companion with max_bodies 1: 1 fault;
  - 2 calls in the sequential chain, max_bodies 2: a tool saved unsafe (safe now) then a call \
of every shape, and a tool saved safe then a tool, a denied approval or a remote sub-agent; and \
in one group, a tool saved unsafe then those four: 1 fault;
  - 1 tool call saved safe, and 1 saved unsafe and safe now, max_bodies 2 (the safe one through \
both runners): any fault, then a crash (at an append, or in the body before or after its \
effect) followed by wake or stop;
  - 1 tool call and a second reply with one unsafe tool call, max_bodies 2: 1 fault;
  - suspended runs (the answers land from outside, the session is woken): a client call, an approval granted, one denied; a client call with an approval granted, and a denied approval with a client call, free, in one group and in the chain, the answers in reply order and reversed; through drive, a client call and an approval in the chain answered reversed: 1 fault;
  - 3 calls, a group and the sequential chain in one reply (the first in both, the second in the chain, the third in the group): a tool saved unsafe (safe now) and two tools, and a denied approval and two safe tools: 1 fault.";

const DEEP_COVERS: &str = "\
scope deep (faults and entries as in ci):
  - 1 call of every shape, max_bodies 1 and 2, the step runner: 2 faults of any kind;
  - the same through drive: 2 faults;
  - 1 tool call of every policy pair and a second reply with one unsafe tool call, \
max_bodies 2: 2 faults;
  - 2 calls, every pair of shapes, free, in one group, or in the sequential chain, max_bodies 2, \
the step runner: 1 fault;
  - suspended runs: every client and approval shape alone, through both runners, and a client \
call with an approval, a denied approval with a client call, two approvals, free, in one group \
and in the chain, the answers in reply order and reversed (and through drive in the chain): \
2 faults;
  - 3 calls, max_bodies 2, the step runner: free, every multiset of 10 shapes (the tool safe, \
unsafe, saved unsafe and safe now, removed; a client call; an approval granted, denied; a \
remote and a local sub-agent; a companion): a reply that only permutes free calls is the same \
reply renamed; in one group, in the chain, and in a group and the chain at once, every ordered \
triple of 4 shapes (the tool safe, unsafe; a denied approval; a remote sub-agent): any fault, \
then a crash followed by wake or stop.";

const THREE_COVERS: &str = "\
scope three (the deep scope's additions, bounded):
  - suspended runs: every client and approval shape alone, through both runners: 2 faults; the \
pairs of the deep scope: 1 fault;
  - 3 calls, the multisets and ordered triples of the deep scope: 1 fault.";

/// Every call shape worth telling apart: attributes a kind does not read are fixed.
pub fn shapes() -> Vec<CallShape> {
    let saved = [Replay::Safe, Replay::Unsafe];
    let nows =
        [Now::Present(Replay::Safe), Now::Present(Replay::Unsafe), Now::Removed, Now::Rejects];
    let shape = |kind, saved, now, approve| CallShape { kind, saved, now, approve };
    let mut out = Vec::new();
    // A server tool and an approved approval read both policies and the registry.
    for kind in [CallKind::Tool, CallKind::Approval] {
        for s in saved {
            for now in nows {
                out.push(shape(kind, s, now, true));
            }
        }
    }
    // A denied approval never runs: no policy matters.
    out.push(shape(CallKind::Approval, Replay::Unsafe, Now::Present(Replay::Unsafe), false));
    // A client call: run by the client, no policy or registry read.
    out.push(shape(CallKind::Client, Replay::Unsafe, Now::Present(Replay::Unsafe), true));
    // Sub-agents read the registry (present, removed, failing arguments), not the policy.
    for kind in [CallKind::RemoteAgent, CallKind::LocalAgent] {
        for now in [Now::Present(Replay::Unsafe), Now::Removed, Now::Rejects] {
            out.push(shape(kind, Replay::Unsafe, now, true));
        }
    }
    // A companion is re-entered whatever the registry says: present or removed.
    for now in [Now::Present(Replay::Unsafe), Now::Removed] {
        out.push(shape(CallKind::Companion, Replay::Unsafe, now, true));
    }
    out
}

fn job(variant: Variant, menus: &[Menu]) -> Job {
    Job { variant, menus: menus.to_vec() }
}

fn one(runner: Runner, max_bodies: u32, call: CallShape, second: bool) -> Variant {
    let answers = Answers::AtOnce;
    Variant { runner, max_bodies, order: Order::Free, calls: vec![call], second, answers }
}

fn two(runner: Runner, max_bodies: u32, order: Order, calls: [CallShape; 2]) -> Variant {
    let answers = Answers::AtOnce;
    Variant { runner, max_bodies, order, calls: calls.to_vec(), second: false, answers }
}

/// `calls` in one reply, `max_bodies` 2, no second reply.
fn many(runner: Runner, order: Order, calls: &[CallShape], answers: Answers) -> Variant {
    Variant { runner, max_bodies: 2, order, calls: calls.to_vec(), second: false, answers }
}

/// Whether the run waits for this call's answer from outside.
fn awaited(shape: &CallShape) -> bool {
    matches!(shape.kind, CallKind::Client | CallKind::Approval)
}

fn client() -> CallShape {
    CallShape { kind: CallKind::Client, ..tool(Replay::Unsafe) }
}

fn approval(approve: bool) -> CallShape {
    CallShape { kind: CallKind::Approval, approve, ..tool(Replay::Unsafe) }
}

/// Suspended runs: each awaited shape alone, through both runners, and a client call with an
/// approval (granted or denied) and two approvals in one reply, in every order attribute, the
/// answers in reply order and reversed.
fn suspensions(all: &[CallShape], alone: &[Runner], menus: &[Menu], pairs: &[Menu]) -> Vec<Job> {
    let mut out = Vec::new();
    for &runner in alone {
        for c in all.iter().filter(|c| awaited(c)) {
            out.push(job(many(runner, Order::Free, &[*c], Answers::Suspend), menus));
        }
    }
    let duos =
        [[client(), approval(true)], [approval(false), client()], [approval(true), approval(true)]];
    for order in [Order::Free, Order::Group, Order::Sequential] {
        for duo in &duos {
            for answers in [Answers::Suspend, Answers::SuspendReversed] {
                out.push(job(many(Runner::Step, order, duo, answers), pairs));
            }
        }
    }
    for answers in [Answers::Suspend, Answers::SuspendReversed] {
        out.push(job(many(Runner::Drive, Order::Sequential, &duos[0], answers), pairs));
    }
    out
}

/// The shapes of a three-call reply: one of each kind, and the tool in the policy pairs that
/// decide a re-run (safe; unsafe; saved unsafe, safe now) and removed.
fn shapes_of_three() -> Vec<CallShape> {
    let at = |now| CallShape { now, ..tool(Replay::Unsafe) };
    vec![
        tool(Replay::Safe),
        tool(Replay::Unsafe),
        at(Now::Present(Replay::Safe)),
        at(Now::Removed),
        client(),
        approval(true),
        approval(false),
        CallShape { kind: CallKind::RemoteAgent, ..tool(Replay::Unsafe) },
        CallShape { kind: CallKind::LocalAgent, ..tool(Replay::Unsafe) },
        CallShape { kind: CallKind::Companion, ..tool(Replay::Unsafe) },
    ]
}

/// Three-call replies. Free calls are not behind one another, so the plan of each reads
/// nothing of where it stands in the reply: a reply that only permutes free calls is the same
/// reply with its calls renamed, and each multiset of shapes is searched once. In one group,
/// in the chain, or in a group and the chain at once, position matters: every ordered triple
/// of the ordered shapes.
fn threes(menus: &[Menu], ordered: &[CallShape]) -> Vec<Job> {
    let free = shapes_of_three();
    let mut out = Vec::new();
    for (i, &a) in free.iter().enumerate() {
        for (j, &b) in free.iter().enumerate().skip(i) {
            for &c in free.iter().skip(j) {
                let v = many(Runner::Step, Order::Free, &[a, b, c], Answers::AtOnce);
                out.push(job(v, menus));
            }
        }
    }
    for order in [Order::Group, Order::Sequential, Order::Mixed] {
        for &a in ordered {
            for &b in ordered {
                for &c in ordered {
                    let v = many(Runner::Step, order, &[a, b, c], Answers::AtOnce);
                    out.push(job(v, menus));
                }
            }
        }
    }
    out
}

/// The shapes of an ordered three-call reply: a call that may run again, one that may not,
/// one whose predecessor's effect never happened (a denied approval), and a sub-agent.
fn ordered_of_three() -> Vec<CallShape> {
    let remote = CallShape { kind: CallKind::RemoteAgent, ..tool(Replay::Unsafe) };
    vec![tool(Replay::Safe), tool(Replay::Unsafe), approval(false), remote]
}

fn tool(saved: Replay) -> CallShape {
    CallShape { kind: CallKind::Tool, saved, now: Now::Present(saved), approve: true }
}

/// Whether one of the first of its kind in [`shapes`] (every tool shape is kept).
fn first_of_kind(shape: &CallShape, all: &[CallShape]) -> bool {
    shape.kind == CallKind::Tool || all.iter().find(|s| s.kind == shape.kind) == Some(shape)
}

fn ci() -> Vec<Job> {
    let full = &[Menu::FULL][..];
    let all = shapes();
    let mut out = Vec::new();
    out.extend(all.iter().map(|&c| job(one(Runner::Step, 2, c, false), full)));
    let reruns = |c: &&CallShape| c.saved == Replay::Safe || c.kind == CallKind::RemoteAgent;
    out.extend(all.iter().filter(reruns).map(|&c| job(one(Runner::Step, 1, c, false), full)));
    let driven = all.iter().filter(|c| first_of_kind(c, &all) || !c.approve);
    out.extend(driven.map(|&c| job(one(Runner::Drive, 2, c, false), full)));
    // A sub-agent or companion whose body dies before its child is recorded, with no body left.
    for kind in [CallKind::RemoteAgent, CallKind::Companion] {
        let call = CallShape { kind, ..tool(Replay::Unsafe) };
        out.push(job(one(Runner::Drive, 1, call, false), full));
    }
    let unsafe_first = CallShape { now: Now::Present(Replay::Safe), ..tool(Replay::Unsafe) };
    let others = [
        tool(Replay::Safe),
        tool(Replay::Unsafe),
        CallShape { kind: CallKind::Approval, approve: false, ..tool(Replay::Unsafe) },
        CallShape { kind: CallKind::RemoteAgent, ..tool(Replay::Unsafe) },
    ];
    for &second in &all {
        out.push(job(two(Runner::Step, 2, Order::Sequential, [unsafe_first, second]), full));
    }
    for second in others {
        out.push(job(two(Runner::Step, 2, Order::Sequential, [tool(Replay::Safe), second]), full));
        out.push(job(two(Runner::Step, 2, Order::Group, [unsafe_first, second]), full));
    }
    let then_crash = &[Menu::FULL, Menu::CRASHES][..];
    out.push(job(one(Runner::Step, 2, tool(Replay::Safe), false), then_crash));
    out.push(job(one(Runner::Step, 2, unsafe_first, false), then_crash));
    out.push(job(one(Runner::Drive, 2, tool(Replay::Safe), false), then_crash));
    out.push(job(one(Runner::Step, 2, tool(Replay::Safe), true), full));
    // Suspended runs: an approval granted and denied and a client call alone, and the pairs
    // with a client call in every order attribute, the answers in either order.
    let alone = [client(), approval(true), approval(false)];
    out.extend(
        alone.iter().map(|c| job(many(Runner::Step, Order::Free, &[*c], Answers::Suspend), full)),
    );
    let duos = [[client(), approval(true)], [approval(false), client()]];
    for order in [Order::Free, Order::Group, Order::Sequential] {
        for duo in &duos {
            for answers in [Answers::Suspend, Answers::SuspendReversed] {
                out.push(job(many(Runner::Step, order, duo, answers), full));
            }
        }
    }
    out.push(job(many(Runner::Drive, Order::Sequential, &duos[0], Answers::SuspendReversed), full));
    // A group and the sequential chain in one reply.
    let mixed = [
        [unsafe_first, tool(Replay::Safe), tool(Replay::Unsafe)],
        [approval(false), tool(Replay::Safe), tool(Replay::Safe)],
    ];
    out.extend(
        mixed.iter().map(|m| job(many(Runner::Step, Order::Mixed, m, Answers::AtOnce), full)),
    );
    out
}

fn deep() -> Vec<Job> {
    let mut out = deep_two();
    let twice = &[Menu::FULL, Menu::FULL][..];
    out.extend(suspensions(&shapes(), &[Runner::Step, Runner::Drive], twice, twice));
    out.extend(threes(&[Menu::FULL, Menu::CRASHES], &ordered_of_three()));
    out
}

fn three() -> Vec<Job> {
    let (once, twice) = (&[Menu::FULL][..], &[Menu::FULL, Menu::FULL][..]);
    let mut out = suspensions(&shapes(), &[Runner::Step, Runner::Drive], twice, once);
    out.extend(threes(once, &ordered_of_three()));
    out
}

/// One and two calls per reply.
fn deep_two() -> Vec<Job> {
    let twice = &[Menu::FULL, Menu::FULL][..];
    let all = shapes();
    let mut out = Vec::new();
    for runner in [Runner::Step, Runner::Drive] {
        for max_bodies in [1, 2] {
            out.extend(all.iter().map(|&c| job(one(runner, max_bodies, c, false), twice)));
        }
    }
    let tools = all.iter().filter(|c| c.kind == CallKind::Tool);
    out.extend(tools.map(|&c| job(one(Runner::Step, 2, c, true), twice)));
    for order in [Order::Free, Order::Group, Order::Sequential] {
        for &a in &all {
            for &b in &all {
                out.push(job(two(Runner::Step, 2, order, [a, b]), &[Menu::FULL]));
            }
        }
    }
    out
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scope::Ci => "ci",
            Scope::Deep => "deep",
            Scope::Three => "three",
        })
    }
}

impl FromStr for Scope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ci" => Ok(Scope::Ci),
            "deep" => Ok(Scope::Deep),
            "three" => Ok(Scope::Three),
            other => Err(format!("`{other}` is not a scope; the scopes are ci, deep and three")),
        }
    }
}
