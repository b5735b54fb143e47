//! The scopes: which script variants the explorer searches, and how many faults each execution
//! takes. The full product of kinds, policies, orders, `max_bodies`, steps and runners is out of
//! reach; the scopes cut it with symmetry (calls that differ only in name are one; every call
//! of a reply shares the order attribute) and by dropping attributes a kind cannot read.

use std::fmt;
use std::str::FromStr;

use stepjournal_codec::{CallKind, Replay};

use super::variant::{CallShape, Now, Order, Runner, Variant};

/// A scope of the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// What CI runs on the debug build.
    Ci,
    /// The deep scope, for a release build.
    Deep,
}

impl Scope {
    /// The variants searched, smallest first, each with its most faults per execution.
    pub fn variants(self) -> Vec<(Variant, usize)> {
        match self {
            Scope::Ci => ci(),
            Scope::Deep => deep(),
        }
    }

    /// What the scope covers, for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Scope::Ci => CI_COVERS,
            Scope::Deep => DEEP_COVERS,
        }
    }
}

const CI_COVERS: &str = "\
scope ci: up to 2 faults per execution, each at any append (crash, the batch landed or lost; \
a store failure, poisoning or not) or any of 4 points in any body (crash, run abandoned with \
the body writing late, run failed), each followed by any of the 8 entries;
  - 1 call: every kind but companion, with every saved and current policy pair it reads \
(safe/unsafe saved; safe, unsafe, removed or arguments failing now; approvals granted or \
denied), max_bodies 1 and 2, the step runner;
  - the same through the tool executor (drive), max_bodies 2;
  - 2 calls: a server tool saved safe or unsafe, kept safe, then every call shape of the 1-call \
set, in one group or in the sequential chain, max_bodies 2, the step runner; 1 fault;
  - 1 call followed by a second reply with one unsafe tool call, max_bodies 2.";

const DEEP_COVERS: &str = "\
scope deep: up to 2 faults per execution, every append and body point, every entry, as in ci;
  - 1 call: every call shape, max_bodies 1 to 3, both runners, with and without a second reply;
  - 2 calls: every pair of call shapes, free, in one group, or in the sequential chain, \
max_bodies 1 and 2, the step runner; and through drive, max_bodies 2.";

/// Every call shape worth telling apart: attributes a kind does not read are fixed.
pub fn shapes() -> Vec<CallShape> {
    let saved = [Replay::Safe, Replay::Unsafe];
    let nows = [Now::Present(Replay::Safe), Now::Present(Replay::Unsafe), Now::Removed, Now::Rejects];
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
    out
}

fn one(runner: Runner, max_bodies: u32, call: CallShape, second: bool) -> (Variant, usize) {
    (Variant { runner, max_bodies, order: Order::Free, calls: vec![call], second }, 2)
}

fn ci() -> Vec<(Variant, usize)> {
    let mut out = Vec::new();
    for max_bodies in [1, 2] {
        out.extend(shapes().into_iter().map(|c| one(Runner::Step, max_bodies, c, false)));
    }
    out.extend(shapes().into_iter().map(|c| one(Runner::Drive, 2, c, false)));
    let firsts = [Replay::Safe, Replay::Unsafe].map(|saved| CallShape {
        kind: CallKind::Tool,
        saved,
        now: Now::Present(Replay::Safe),
        approve: true,
    });
    for order in [Order::Group, Order::Sequential] {
        for first in firsts {
            for second in shapes() {
                let calls = vec![first, second];
                let variant =
                    Variant { runner: Runner::Step, max_bodies: 2, order, calls, second: false };
                out.push((variant, 1));
            }
        }
    }
    let plain = CallShape {
        kind: CallKind::Tool,
        saved: Replay::Safe,
        now: Now::Present(Replay::Safe),
        approve: true,
    };
    out.push(one(Runner::Step, 2, plain, true));
    out
}

fn deep() -> Vec<(Variant, usize)> {
    let mut out = Vec::new();
    for runner in [Runner::Step, Runner::Drive] {
        for second in [false, true] {
            for max_bodies in 1..=3 {
                out.extend(shapes().into_iter().map(|c| one(runner, max_bodies, c, second)));
            }
        }
    }
    for (runner, bodies) in [(Runner::Step, &[1, 2][..]), (Runner::Drive, &[2][..])] {
        for &max_bodies in bodies {
            for order in [Order::Free, Order::Group, Order::Sequential] {
                for a in shapes() {
                    for b in shapes() {
                        let calls = vec![a, b];
                        let variant = Variant { runner, max_bodies, order, calls, second: false };
                        out.push((variant, 2));
                    }
                }
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
        })
    }
}

impl FromStr for Scope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ci" => Ok(Scope::Ci),
            "deep" => Ok(Scope::Deep),
            other => Err(format!("`{other}` is not a scope; the scopes are ci and deep")),
        }
    }
}
