//! The world of one execution: the shared store, the session, the actors, and the moves the
//! search may choose at each point. Every execution is made afresh from its moves, so it
//! replays exactly.

use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use stepjournal::writer::SequentialIds;
use stepjournal::{Journal, JournalOptions, Reply, Tools};
use stepjournal_backends::{JournalStore, OwnerId};
use stepjournal_codec::{CallId, Entry, Replay, SessionId};

use super::actor::{
    Actor, CLIENT, Effects, GATED, LEASE_TTL, Making, Op, Role, TOOL, Waits, registry, tools,
};
use super::store::{ActorId, Handle, Judge, Shared};
use super::variant::{ActorVariant, Setup};

/// When the store's clock starts, unix ms.
const START: u64 = 1_000_000;
/// How far time moves when it passes: a little more than half a lease, so a lease renewed in
/// between outlives one passing and none outlives two.
pub(crate) const TICK: u64 = LEASE_TTL / 2 + 1;

/// One step the search chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Move {
    /// The actor starts an operation.
    Start(usize, OpName),
    /// The actor's operation goes on past the store operation it waits for.
    Go(usize),
    /// The dropper's future is dropped at the store operation it waits for, which is carried
    /// out first (`landed`) or never.
    Drop(usize, bool),
    /// The runtime's process dies there, the store operation carried out first or never.
    Crash(usize, bool),
    /// Time passes on the store's clock.
    Tick,
}

/// An operation's name, as a move names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpName(pub(crate) Op);

/// The moves of one execution, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct Interleaving(pub Vec<Move>);

/// The world of one execution.
pub(crate) struct World {
    pub(crate) shared: Arc<Shared>,
    pub(crate) session: SessionId,
    pub(crate) actors: Vec<Actor>,
    ticks: u32,
    pub(crate) effects: Effects,
    pub(crate) replay: Replay,
    waits: Waits,
    /// Each move made, as text, with what came of it.
    pub(crate) trace: Vec<String>,
}

impl World {
    pub(crate) fn new(variant: &ActorVariant, judge: Judge) -> Self {
        let shared = Shared::new(START);
        let session = SessionId::from_stored("s1");
        let replay = match variant.setup {
            Setup::CrashedSafe => Replay::Safe,
            _ => Replay::Unsafe,
        };
        let effects = Effects::default();
        set_up(variant.setup, &shared, &session, replay, &effects);
        let making = Making { shared: &shared, replay, effects: &effects, judge };
        let actors = variant
            .cast
            .iter()
            .enumerate()
            .map(|(i, cast)| {
                let skew = if i == 0 { 0 } else { variant.skew };
                let budget = match cast.role {
                    Role::Runtime => 3,
                    Role::Operator => 1,
                    Role::Dropper => 5,
                };
                Actor::new(ActorId(i), cast.name, cast.role, skew, budget, &making)
            })
            .collect();
        let waits = match variant.setup {
            Setup::SuspendedClient => Waits::Client,
            Setup::SuspendedApproval => Waits::Approval,
            _ => Waits::Nothing,
        };
        World {
            shared,
            session,
            actors,
            ticks: variant.ticks,
            effects,
            replay,
            waits,
            trace: Vec::new(),
        }
    }

    /// The moves open now.
    pub(crate) fn moves(&self) -> Vec<Move> {
        let mut moves = Vec::new();
        for (i, actor) in self.actors.iter().enumerate() {
            if actor.is_gone() {
                continue;
            }
            if actor.in_flight().is_some() {
                let Some(append) = self.shared.waiting(actor.id) else { continue };
                moves.push(Move::Go(i));
                match actor.role {
                    Role::Dropper if !actor.dropped => {
                        moves.push(Move::Drop(i, false));
                        if append {
                            moves.push(Move::Drop(i, true));
                        }
                    }
                    Role::Runtime => {
                        moves.push(Move::Crash(i, false));
                        if append {
                            moves.push(Move::Crash(i, true));
                        }
                    }
                    _ => {}
                }
                continue;
            }
            let ops = actor.startable(self.waits);
            moves.extend(ops.into_iter().map(|op| Move::Start(i, OpName(op))));
            if actor.role == Role::Runtime && actor.run.is_some() {
                moves.push(Move::Crash(i, false));
            }
        }
        if self.ticks > 0 && !moves.is_empty() {
            moves.push(Move::Tick);
        }
        moves
    }

    /// Makes `m`.
    pub(crate) fn apply(&mut self, m: Move) {
        let shared = self.shared.clone();
        match m {
            Move::Start(i, OpName(op)) => {
                if let Some(a) = self.actors.get_mut(i) {
                    a.start(op, &shared, &self.session);
                }
            }
            Move::Go(i) => {
                if let Some(a) = self.actors.get_mut(i) {
                    a.go(&shared);
                }
            }
            Move::Drop(i, landed) => {
                if let Some(a) = self.actors.get_mut(i) {
                    a.drop_future(&shared, landed);
                }
            }
            Move::Crash(i, landed) => {
                if let Some(a) = self.actors.get_mut(i) {
                    a.crash(&shared, landed);
                }
            }
            Move::Tick => {
                self.ticks = self.ticks.saturating_sub(1);
                shared.advance(TICK);
            }
        }
        let text = MoveText { m, world: self }.to_string();
        let landed = shared.landed();
        let what = landed
            .last()
            .map(|l| format!(" (log: {} batches, last at seq {})", landed.len(), l.at))
            .unwrap_or_default();
        self.trace.push(format!("{text}{what}"));
    }

    /// The state's key: the store's part (the logs, times aside; the leases, the clock, the
    /// operations held, what each actor received in its operation), each actor's part (its
    /// program, its run's status and view), the effects, and the moves left of time.
    pub(crate) fn key(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.shared.key(&mut h);
        for actor in &self.actors {
            actor.key(&mut h);
        }
        self.effects.lock().unwrap_or_else(|p| p.into_inner()).hash(&mut h);
        self.ticks.hash(&mut h);
        h.finish()
    }

    /// The name of actor `i`.
    pub(crate) fn name(&self, i: usize) -> &'static str {
        self.actors.get(i).map_or("?", |a| a.name)
    }
}

/// A move written with its actor's name.
struct MoveText<'a> {
    m: Move,
    world: &'a World,
}

impl fmt::Display for MoveText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_move(f, self.m, |i| self.world.name(i))
    }
}

fn write_move(
    f: &mut fmt::Formatter<'_>,
    m: Move,
    name: impl Fn(usize) -> &'static str,
) -> fmt::Result {
    match m {
        Move::Start(i, OpName(op)) => write!(f, "{}:{}", name(i), op.as_str()),
        Move::Go(i) => write!(f, "{}:go", name(i)),
        Move::Drop(i, false) => write!(f, "{}:drop", name(i)),
        Move::Drop(i, true) => write!(f, "{}:drop-landed", name(i)),
        Move::Crash(i, false) => write!(f, "{}:crash", name(i)),
        Move::Crash(i, true) => write!(f, "{}:crash-landed", name(i)),
        Move::Tick => f.write_str("tick"),
    }
}

impl Interleaving {
    /// The interleaving as one line, each move named by its actor's name in `variant`.
    pub fn text(&self, variant: &ActorVariant) -> String {
        struct Line<'a>(&'a Interleaving, &'a ActorVariant);
        impl fmt::Display for Line<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                if self.0.0.is_empty() {
                    return f.write_str("-");
                }
                for (k, m) in self.0.0.iter().enumerate() {
                    if k > 0 {
                        f.write_str(" ")?;
                    }
                    write_move(f, *m, |i| self.1.cast.get(i).map_or("?", |c| c.name))?;
                }
                Ok(())
            }
        }
        Line(self, variant).to_string()
    }

    /// Reads an interleaving written by [`text`](Self::text) for `variant`.
    pub fn parse(text: &str, variant: &ActorVariant) -> Result<Self, InterleavingError> {
        let text = text.trim();
        if text == "-" || text.is_empty() {
            return Ok(Interleaving::default());
        }
        let fail = |why: String| InterleavingError { text: text.to_owned(), why };
        let mut moves = Vec::new();
        for word in text.split_whitespace() {
            if word == "tick" {
                moves.push(Move::Tick);
                continue;
            }
            let (name, what) =
                word.split_once(':').ok_or_else(|| fail(format!("`{word}` is not ACTOR:MOVE")))?;
            let i = variant
                .cast
                .iter()
                .position(|c| c.name == name)
                .ok_or_else(|| fail(format!("`{name}` is not an actor of the variant")))?;
            let m = match what {
                "go" => Move::Go(i),
                "drop" => Move::Drop(i, false),
                "drop-landed" => Move::Drop(i, true),
                "crash" => Move::Crash(i, false),
                "crash-landed" => Move::Crash(i, true),
                op => {
                    let op = Op::ALL
                        .into_iter()
                        .find(|o| o.as_str() == op)
                        .ok_or_else(|| fail(format!("`{op}` is not a move")))?;
                    Move::Start(i, OpName(op))
                }
            };
            moves.push(m);
        }
        Ok(Interleaving(moves))
    }
}

/// An interleaving's text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not an interleaving ({why}); the form is `-` or moves separated by spaces, each \
     `tick` or ACTOR:MOVE, MOVE one of go, drop, drop-landed, crash, crash-landed or an operation"
)]
pub struct InterleavingError {
    text: String,
    why: String,
}

/// Writes the setup's log with a journal of its own (a process that then died), and lets its
/// lease lapse.
fn set_up(setup: Setup, shared: &Arc<Shared>, session: &SessionId, replay: Replay, fx: &Effects) {
    if setup == Setup::Fresh {
        return;
    }
    let store: Arc<dyn JournalStore> =
        Arc::new(Handle::ungated(shared.clone(), ActorId(usize::MAX)));
    let options = JournalOptions::new()
        .owner(OwnerId::new("gone"))
        .ids(Arc::new(SequentialIds::with_prefix("s")))
        .lease_ttl(Duration::from_millis(LEASE_TTL))
        .lease_keeper(false);
    let Ok(journal) = Journal::new(store, Arc::new(registry(replay)), options) else { return };
    let tools: Tools = tools(replay, fx);
    let tool = match setup {
        Setup::SuspendedClient => CLIENT,
        Setup::SuspendedApproval => GATED,
        _ => TOOL,
    };
    let entry = Entry::NewTurn { message: "go".to_owned() };
    let Ok(run) = journal.begin_run(session, entry) else { return };
    let Ok(call) = tools.call(CallId::new("c1"), tool, serde_json::json!({})) else { return };
    let Ok(step) = run.commit_reply(Reply::new("on it").call(call)) else { return };
    match setup {
        Setup::CrashedUnsafe | Setup::CrashedSafe => {
            let _body = step.start_body(&CallId::new("c1"));
        }
        Setup::SuspendedClient | Setup::SuspendedApproval => {
            let _ = step.suspend(&[CallId::new("c1")]);
        }
        _ => {}
    }
    drop((step, run, journal));
    shared.advance(LEASE_TTL + 1);
}
