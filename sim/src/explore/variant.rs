//! A script variant: the calls of the first reply (each a kind, its saved policy and the tool as
//! it is after the first fault), their order attribute, `max_bodies`, whether a second reply
//! follows, and which runner acts on the steps. Written and read back as one line, so that a
//! failing execution can be replayed.

use std::fmt;
use std::str::FromStr;

use stepjournal_codec::{CallKind, Replay};
use stepjournal_recovery::{Config, MemoryRegistry};

use crate::{Script, ScriptCall, ScriptStep, ToolSet};

/// The tool a call names, as it is once the first fault fired (a deploy between a crash and
/// its recovery).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Now {
    /// Present with this policy, the saved arguments passing.
    Present(Replay),
    /// Removed from the registry.
    Removed,
    /// Present, safe, but the saved arguments fail its current schema.
    Rejects,
}

/// One call of the first reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallShape {
    /// Its kind.
    pub kind: CallKind,
    /// The tool's policy when the model called it.
    pub saved: Replay,
    /// The tool after the first fault.
    pub now: Now,
    /// For an approval: whether the approver grants it.
    pub approve: bool,
}

/// The order attribute every call of the first reply shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Order {
    /// No group, not sequential.
    Free,
    /// All in one concurrency group.
    Group,
    /// All in the sequential chain.
    Sequential,
    /// A group and the sequential chain in one reply: the first call in group `g` and in the
    /// chain, the second in the chain only, the third in the group only (so the second and
    /// the third are each behind the first, and not behind each other).
    Mixed,
}

/// How client calls and approvals are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answers {
    /// At once, in the run that made the calls (the step runner only: `drive` always
    /// suspends, and answers in reply order).
    AtOnce,
    /// The run suspends (`run_ended suspended`); the answers land from outside in reply order
    /// and the session is woken: through `Step::client_answer` / `Step::approval` in the woken
    /// run (the step runner), or `Journal::answer_client` / `decide_approval`, which append
    /// the answer and wake the session (`drive`).
    Suspend,
    /// The run suspends, and the answers land last call first (the step runner writes them
    /// all before it acts on any call; in reply order it answers each call as it reaches it).
    SuspendReversed,
}

/// Which runner acts on the steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runner {
    /// The simulator's step runner (`Step::start_body`, one body after the other).
    Step,
    /// The tool executor (`Step::drive`).
    Drive,
}

/// One script variant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Variant {
    /// Which runner acts on the steps.
    pub runner: Runner,
    /// `max_bodies`.
    pub max_bodies: u32,
    /// The first reply's order attribute.
    pub order: Order,
    /// The first reply's calls.
    pub calls: Vec<CallShape>,
    /// Whether a second reply follows, with one unsafe `tool` call.
    pub second: bool,
    /// How client calls and approvals are answered.
    pub answers: Answers,
}

/// The tool of the second reply's call: never changed by the deploy.
const NEXT_TOOL: &str = "next";

fn tool_name(i: usize) -> String {
    format!("t{}", i + 1)
}

impl Variant {
    /// The script: the user's message, the first reply with the calls, and the second reply if
    /// any; call ids `c1`, `c2`, ...; the `i`-th call names tool `t{i}`.
    pub fn script(&self) -> Script {
        let mut first = ScriptStep::new("On it.");
        for (i, shape) in self.calls.iter().enumerate() {
            let mut call = ScriptCall::tool(format!("c{}", i + 1), tool_name(i)).kind(shape.kind);
            match self.order {
                Order::Free => {}
                Order::Group => call = call.group("g"),
                Order::Sequential => call = call.sequential(),
                Order::Mixed => match i % 3 {
                    0 => call = call.group("g").sequential(),
                    1 => call = call.sequential(),
                    _ => call = call.group("g"),
                },
            }
            if shape.kind == CallKind::Approval && !shape.approve {
                call = call.denied();
            }
            first = first.call(call);
        }
        let mut script = Script::new("Do the thing.").step(first);
        if self.second {
            let call = ScriptCall::tool(format!("c{}", self.calls.len() + 1), NEXT_TOOL);
            script = script.step(ScriptStep::new("And the next.").call(call));
        }
        script.step(ScriptStep::new("Done."))
    }

    /// The tools with their saved policies (the registry until the first fault).
    pub fn tools(&self) -> ToolSet {
        let set = self
            .calls
            .iter()
            .enumerate()
            .fold(ToolSet::new(), |set, (i, shape)| set.tool(tool_name(i), shape.saved));
        set.tool(NEXT_TOOL, Replay::Unsafe)
    }

    /// The registry once the first fault fired.
    pub fn registry_now(&self) -> MemoryRegistry {
        let registry =
            self.calls.iter().enumerate().fold(MemoryRegistry::new(), |r, (i, s)| match s.now {
                Now::Present(replay) => r.with_tool(tool_name(i), replay),
                Now::Removed => r,
                Now::Rejects => r.with_rejecting_tool(
                    tool_name(i),
                    Replay::Safe,
                    "the new schema requires a field the call lacks",
                ),
            });
        registry.with_tool(NEXT_TOOL, Replay::Unsafe)
    }

    /// Recovery's settings.
    pub fn config(&self) -> Config {
        Config::new(self.max_bodies).unwrap_or_default()
    }

    /// The simulator's case for `faults`: the settings and how answers land.
    pub fn case(&self, faults: Vec<crate::Fault>) -> crate::Case {
        crate::Case {
            faults,
            config: self.config(),
            suspend: self.answers != Answers::AtOnce,
            reverse_answers: self.answers == Answers::SuspendReversed,
        }
    }
}

fn replay_str(r: Replay) -> &'static str {
    match r {
        Replay::Safe => "s",
        Replay::Unsafe => "u",
    }
}

impl fmt::Display for CallShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let now = match self.now {
            Now::Present(r) => replay_str(r),
            Now::Removed => "removed",
            Now::Rejects => "rejects",
        };
        write!(f, "{}:{}>{now}", self.kind.as_str(), replay_str(self.saved))?;
        if self.kind == CallKind::Approval && !self.approve {
            f.write_str(":denied")?;
        }
        Ok(())
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let runner = match self.runner {
            Runner::Step => "step",
            Runner::Drive => "drive",
        };
        let order = match self.order {
            Order::Free => "free",
            Order::Group => "group",
            Order::Sequential => "sequential",
            Order::Mixed => "mixed",
        };
        let calls: Vec<String> = self.calls.iter().map(|c| c.to_string()).collect();
        write!(f, "{runner}/mb{}/{order}/{}", self.max_bodies, calls.join("+"))?;
        if self.second {
            f.write_str("/then-next")?;
        }
        match self.answers {
            Answers::AtOnce => {}
            Answers::Suspend => f.write_str("/suspend")?,
            Answers::SuspendReversed => f.write_str("/suspend-reversed")?,
        }
        Ok(())
    }
}

/// A variant's text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not a script variant ({why}); the form is RUNNER/mbN/ORDER/KIND:S>N+...[/then-next][/suspend|/suspend-reversed], e.g. step/mb2/sequential/tool:u>s+client:u>u"
)]
pub struct VariantError {
    text: String,
    why: String,
}

fn parse_replay(s: &str) -> Option<Replay> {
    match s {
        "s" => Some(Replay::Safe),
        "u" => Some(Replay::Unsafe),
        _ => None,
    }
}

fn parse_kind(s: &str) -> Option<CallKind> {
    [
        CallKind::Tool,
        CallKind::Client,
        CallKind::Approval,
        CallKind::RemoteAgent,
        CallKind::LocalAgent,
        CallKind::Companion,
    ]
    .into_iter()
    .find(|k| k.as_str() == s)
}

fn parse_call(s: &str) -> Result<CallShape, String> {
    let mut parts = s.split(':');
    let kind = parts.next().and_then(parse_kind).ok_or(format!("unknown kind in `{s}`"))?;
    let policy = parts.next().ok_or(format!("no policies in `{s}`"))?;
    let (saved, now) = policy.split_once('>').ok_or(format!("`{policy}` is not SAVED>NOW"))?;
    let saved = parse_replay(saved).ok_or(format!("saved policy `{saved}` is not s or u"))?;
    let now = match now {
        "removed" => Now::Removed,
        "rejects" => Now::Rejects,
        other => Now::Present(
            parse_replay(other).ok_or(format!("`{other}` is not s, u, removed or rejects"))?,
        ),
    };
    let approve = match parts.next() {
        None => true,
        Some("denied") => false,
        Some(other) => return Err(format!("`{other}` is not `denied`")),
    };
    Ok(CallShape { kind, saved, now, approve })
}

impl FromStr for Variant {
    type Err = VariantError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |why: String| VariantError { text: text.to_owned(), why };
        let parts: Vec<&str> = text.trim().split('/').collect();
        let [runner, mb, order, calls, rest @ ..] = parts.as_slice() else {
            return Err(err("too few parts".to_owned()));
        };
        let runner = match *runner {
            "step" => Runner::Step,
            "drive" => Runner::Drive,
            other => return Err(err(format!("runner `{other}` is not step or drive"))),
        };
        let max_bodies = mb
            .strip_prefix("mb")
            .and_then(|n| n.parse().ok())
            .filter(|n| *n >= 1)
            .ok_or_else(|| err(format!("`{mb}` is not mbN with N at least 1")))?;
        let order = match *order {
            "free" => Order::Free,
            "group" => Order::Group,
            "sequential" => Order::Sequential,
            "mixed" => Order::Mixed,
            other => {
                return Err(err(format!(
                    "order `{other}` is not free, group, sequential or mixed"
                )));
            }
        };
        let calls = calls.split('+').map(parse_call).collect::<Result<Vec<_>, _>>().map_err(err)?;
        let (second, rest) = match rest {
            ["then-next", rest @ ..] => (true, rest),
            rest => (false, rest),
        };
        let answers = match rest {
            [] => Answers::AtOnce,
            ["suspend"] => Answers::Suspend,
            ["suspend-reversed"] => Answers::SuspendReversed,
            _ => {
                let why =
                    "only `then-next`, then `suspend` or `suspend-reversed`, may follow the calls";
                return Err(err(why.to_owned()));
            }
        };
        Ok(Variant { runner, max_bodies, order, calls, second, answers })
    }
}
