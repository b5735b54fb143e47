//! One actor: a runtime, the operator, or a runtime whose futures are dropped. Each has its own
//! journal over its own store handle (a process of its own), its own clock, its own ids, and a
//! small program; each step the search chooses starts one of its operations or lets the one in
//! flight go on past the store operation it waits for.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::hash::{DefaultHasher, Hash};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use stepjournal::writer::{Clock, SequentialIds};
use stepjournal::{Journal, JournalOptions, RecoverOptions, Reply, Run, RunStatus, Tools};
use stepjournal_backends::{JournalStore, OwnerId};
use stepjournal_codec::{CallId, Entry, RawJson, Replay, RunOutcome, SessionId, UnixMillis};
use stepjournal_recovery::{Config, MemoryRegistry};

use super::store::{ActorId, Handle, Judge, Shared};

/// How long a lease lasts, logical ms.
pub(crate) const LEASE_TTL: u64 = 30;

/// The tool every reply calls: a body with an effect.
pub(crate) const TOOL: &str = "t";
/// A tool the client runs.
pub(crate) const CLIENT: &str = "ask";
/// A tool whose body waits for an approval.
pub(crate) const GATED: &str = "gate";

/// What an actor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A runtime: recovers sessions, answers its own users' decisions, drives, ends, keeps its
    /// leases, crashes.
    Runtime,
    /// The operator at the command line: one of stop, answer, approve, deny, delete.
    Operator,
    /// A runtime serving a new turn whose futures may be dropped at any store operation of
    /// `begin_run`, `commit_reply`, `drive` and `end` (then it tries the operation once more).
    Dropper,
}

/// An operation an actor starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Op {
    Recover,
    Decide,
    Drive,
    End,
    KeepLeases,
    Stop,
    Answer,
    Approve,
    Deny,
    Delete,
    NewTurn,
    CommitReply,
}

impl Op {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Op::Recover => "recover",
            Op::Decide => "decide",
            Op::Drive => "drive",
            Op::End => "end",
            Op::KeepLeases => "keep-leases",
            Op::Stop => "stop",
            Op::Answer => "answer",
            Op::Approve => "approve",
            Op::Deny => "deny",
            Op::Delete => "delete",
            Op::NewTurn => "new-turn",
            Op::CommitReply => "commit-reply",
        }
    }

    pub(crate) const ALL: [Op; 12] = [
        Op::Recover,
        Op::Decide,
        Op::Drive,
        Op::End,
        Op::KeepLeases,
        Op::Stop,
        Op::Answer,
        Op::Approve,
        Op::Deny,
        Op::Delete,
        Op::NewTurn,
        Op::CommitReply,
    ];
}

/// What the session's waiting call is, for the operations that answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Waits {
    Nothing,
    Client,
    Approval,
}

/// What a finished operation handed back.
enum Finished {
    /// A run to go on with (or none).
    Run(Option<Run>),
    /// Done, nothing to keep.
    Done,
}

type Flight = Pin<Box<dyn Future<Output = Finished>>>;

/// The actor's clock: the store's, moved by its skew. It stamps the events it appends.
#[derive(Debug)]
struct ActorClock {
    shared: Arc<SharedClock>,
    skew: i64,
}

/// The store's clock as the actors' clocks read it.
pub(crate) struct SharedClock(pub(crate) Arc<Shared>);

impl fmt::Debug for SharedClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the store's clock")
    }
}

impl Clock for ActorClock {
    fn now(&self) -> UnixMillis {
        UnixMillis(self.shared.0.now().saturating_add_signed(self.skew))
    }
}

/// The effects the bodies performed: tool, dispatch id, attempt.
pub(crate) type Effects = Arc<Mutex<Vec<(String, String, u32)>>>;

/// The tools every actor runs, their bodies recording effects.
pub(crate) fn tools(replay: Replay, effects: &Effects) -> Tools {
    let body = |effects: Effects, tool: &'static str| {
        move |_args: serde_json::Value, ctx: stepjournal::CallCtx| {
            let record = (tool.to_owned(), ctx.dispatch().to_string(), ctx.attempt().get());
            effects.lock().unwrap_or_else(|p| p.into_inner()).push(record);
            async { Ok::<_, String>(serde_json::json!({ "done": true })) }
        }
    };
    Tools::new()
        .tool(TOOL, serde_json::json!({}), replay, body(effects.clone(), TOOL))
        .client_tool(CLIENT, serde_json::json!({}))
        .approval_tool(GATED, serde_json::json!({}), Replay::Unsafe, body(effects.clone(), GATED))
}

/// The registry recovery decides with.
pub(crate) fn registry(replay: Replay) -> MemoryRegistry {
    MemoryRegistry::new()
        .with_tool(TOOL, replay)
        .with_tool(CLIENT, Replay::Unsafe)
        .with_tool(GATED, Replay::Unsafe)
}

/// How the actor stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Life {
    Alive,
    /// Its process died (or the operator's command exited).
    Gone,
}

/// One actor.
pub(crate) struct Actor {
    pub(crate) id: ActorId,
    pub(crate) name: &'static str,
    pub(crate) role: Role,
    journal: Option<Journal>,
    tools: Arc<Tools>,
    pub(crate) run: Option<Run>,
    flight: Option<(Op, Flight)>,
    life: Life,
    /// Operations it may still start.
    budget: u32,
    /// The dropper's next operations, in order.
    script: Vec<Op>,
    /// The dropper's future was dropped once (it drops one at most).
    pub(crate) dropped: bool,
    /// The operation whose future was dropped, tried once more.
    retry: Option<Op>,
    /// The operations it finished, in order, with how they came out.
    pub(crate) history: Vec<String>,
}

/// What every actor is made with.
pub(crate) struct Making<'a> {
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) replay: Replay,
    pub(crate) effects: &'a Effects,
    pub(crate) judge: Judge,
}

impl Actor {
    pub(crate) fn new(
        id: ActorId,
        name: &'static str,
        role: Role,
        skew: i64,
        budget: u32,
        making: &Making<'_>,
    ) -> Self {
        let handle = Handle::new(making.shared.clone(), id, skew, making.judge);
        let store: Arc<dyn JournalStore> = Arc::new(handle);
        let clock = ActorClock { shared: Arc::new(SharedClock(making.shared.clone())), skew };
        let options = JournalOptions::new()
            .owner(OwnerId::new(name))
            .ids(Arc::new(SequentialIds::with_prefix(name)))
            .clock(Arc::new(clock))
            .lease_ttl(Duration::from_millis(LEASE_TTL))
            .lease_keeper(false)
            .recovery(Config::new(2).unwrap_or_default());
        let registry = Arc::new(registry(making.replay));
        let journal = Journal::new(store, registry, options).ok();
        let script = match role {
            Role::Dropper => vec![Op::End, Op::Drive, Op::CommitReply, Op::NewTurn],
            _ => Vec::new(),
        };
        Actor {
            id,
            name,
            role,
            journal,
            tools: Arc::new(tools(making.replay, making.effects)),
            run: None,
            flight: None,
            life: Life::Alive,
            budget,
            script,
            dropped: false,
            retry: None,
            history: Vec::new(),
        }
    }

    /// The journal, while the actor is alive.
    pub(crate) fn journal(&self) -> Option<&Journal> {
        self.journal.as_ref().filter(|_| self.life == Life::Alive)
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.life == Life::Gone
    }

    pub(crate) fn in_flight(&self) -> Option<Op> {
        self.flight.as_ref().map(|(op, _)| *op)
    }

    /// The operations the actor may start now.
    pub(crate) fn startable(&self, waits: Waits) -> Vec<Op> {
        if self.life == Life::Gone || self.flight.is_some() || self.budget == 0 {
            return Vec::new();
        }
        if let Some(op) = self.retry {
            return vec![op];
        }
        let open = self.run.as_ref().filter(|r| r.status() == RunStatus::Open);
        match self.role {
            Role::Runtime => match open {
                Some(run) if run.step().is_some() => vec![Op::Drive, Op::KeepLeases],
                Some(_) => vec![Op::End, Op::KeepLeases],
                None => {
                    let mut ops = vec![Op::Recover];
                    if waits != Waits::Nothing {
                        ops.push(Op::Decide);
                    }
                    ops
                }
            },
            Role::Operator => {
                let mut ops = vec![Op::Stop, Op::Delete];
                match waits {
                    Waits::Client => ops.push(Op::Answer),
                    Waits::Approval => ops.extend([Op::Approve, Op::Deny]),
                    Waits::Nothing => {}
                }
                ops
            }
            Role::Dropper => match self.script.last() {
                Some(Op::NewTurn) => vec![Op::NewTurn],
                Some(&op) if open.is_some() => vec![op],
                _ => Vec::new(),
            },
        }
    }

    /// Starts `op` and lets it run to its first store operation.
    pub(crate) fn start(&mut self, op: Op, shared: &Shared, session: &SessionId) {
        let Some(journal) = self.journal().cloned() else { return };
        self.budget = self.budget.saturating_sub(1);
        if self.role == Role::Dropper && self.retry.take().is_none() {
            self.script.pop();
        }
        shared.begin(self.id, op.as_str(), session);
        let flight = flight(op, journal, self.run.clone(), self.tools.clone(), session.clone());
        self.flight = Some((op, flight));
        self.poll();
    }

    /// Lets the operation in flight go on past the store operation it waits for.
    pub(crate) fn go(&mut self, shared: &Shared) {
        shared.release(self.id);
        self.poll();
    }

    /// Drops the future in flight, its store operation carried out first (`landed`) or never.
    /// The actor tries the operation once more.
    pub(crate) fn drop_future(&mut self, shared: &Shared, landed: bool) {
        if landed {
            shared.release(self.id);
        } else {
            shared.forget(self.id);
        }
        if let Some((op, flight)) = self.flight.take() {
            drop(flight);
            self.dropped = true;
            self.retry = Some(op);
            self.budget = self.budget.max(1);
            self.history.push(format!("{} dropped", op.as_str()));
        }
    }

    /// The process dies: its store operation carried out first (`landed`) or never, every
    /// future, run and lease-keeping of it gone with it.
    pub(crate) fn crash(&mut self, shared: &Shared, landed: bool) {
        if landed {
            shared.release(self.id);
        } else {
            shared.forget(self.id);
        }
        self.flight = None;
        self.run = None;
        self.journal = None;
        self.life = Life::Gone;
        self.history.push("crashed".to_owned());
    }

    /// Polls the operation in flight until it waits at the gate or finishes.
    fn poll(&mut self) {
        let mut cx = Context::from_waker(Waker::noop());
        let Some((op, flight)) = self.flight.as_mut() else { return };
        let op = *op;
        let finished = match flight.as_mut().poll(&mut cx) {
            Poll::Ready(finished) => finished,
            Poll::Pending => return,
        };
        self.flight = None;
        match finished {
            Finished::Run(run) => {
                let got = run.is_some();
                if got || op == Op::Recover {
                    self.run = run;
                }
                self.history.push(format!("{} {}", op.as_str(), if got { "ran" } else { "-" }));
            }
            Finished::Done => self.history.push(op.as_str().to_owned()),
        }
        if self.role == Role::Operator {
            // The command exits: its runs go, their leases released on the way out.
            self.run = None;
            if let Some(journal) = self.journal.take() {
                let _ = journal.keep_leases();
            }
            self.life = Life::Gone;
        }
        if let Some(run) = &self.run
            && run.status() != RunStatus::Open
        {
            self.run = None;
        }
    }

    /// Whether its future waits for something that is not at the gate (it would never finish).
    pub(crate) fn is_stuck(&self, shared: &Shared) -> bool {
        self.flight.is_some() && shared.waiting(self.id).is_none()
    }

    /// The actor's part of the state's key.
    pub(crate) fn key(&self, h: &mut DefaultHasher) {
        (self.name, self.life, self.budget, self.dropped, self.retry, self.in_flight()).hash(h);
        self.script.hash(h);
        match &self.run {
            Some(run) => {
                (run.id().as_str(), format!("{:?}", run.status()), run.tail().get()).hash(h);
                run.step().map(|s| s.number().get()).hash(h);
                for call in run.open_calls() {
                    call.as_str().hash(h);
                }
            }
            None => 0u8.hash(h),
        }
    }
}

/// The future of `op`, owning what it uses.
fn flight(
    op: Op,
    journal: Journal,
    run: Option<Run>,
    tools: Arc<Tools>,
    session: SessionId,
) -> Flight {
    let call = || CallId::new("c1");
    match op {
        Op::Recover => Box::pin(async move {
            let slot: Rc<RefCell<Option<Run>>> = Rc::default();
            let kept = slot.clone();
            let keep = move |run: Run, _| {
                kept.borrow_mut().replace(run);
                async {}
            };
            let _report = journal.recover_all(&tools, RecoverOptions::new(), keep).await;
            let run = slot.borrow_mut().take();
            Finished::Run(run)
        }),
        Op::Decide | Op::Approve => Box::pin(async move {
            let answered = match op {
                Op::Decide if journal.state(&session).is_ok_and(|s| waits_client(&s)) => {
                    journal.answer_client(&session, &call(), RawJson::default()).await
                }
                _ => journal.decide_approval(&session, &call(), true).await,
            };
            Finished::Run(answered.ok())
        }),
        Op::Deny => Box::pin(async move {
            Finished::Run(journal.decide_approval(&session, &call(), false).await.ok())
        }),
        Op::Answer => Box::pin(async move {
            let answered = journal.answer_client(&session, &call(), RawJson::default()).await;
            Finished::Run(answered.ok())
        }),
        Op::Stop => Box::pin(async move {
            let _ = journal.stop_async(&session).await;
            Finished::Done
        }),
        Op::Delete => Box::pin(async move {
            // As the command deletes: refused while a run holds a live lease by the store's
            // clock.
            let store = journal.store();
            let live =
                store.head(&session).ok().flatten().is_some_and(|h| h.live_lease().is_some());
            if !live {
                let _ = store.delete(&session);
            }
            Finished::Done
        }),
        Op::KeepLeases => Box::pin(async move {
            let _ = journal.keep_leases();
            Finished::Run(run)
        }),
        Op::Drive => Box::pin(async move {
            if let Some(run) = &run {
                let _ = run.drive(&tools).await;
            }
            Finished::Run(run)
        }),
        Op::End => Box::pin(async move {
            if let Some(run) = &run {
                let _ = run.end_async(RunOutcome::Completed).await;
            }
            Finished::Run(run)
        }),
        Op::NewTurn => Box::pin(async move {
            let entry = Entry::NewTurn { message: "and now?".to_owned() };
            Finished::Run(journal.begin_run_async(&session, entry).await.ok())
        }),
        Op::CommitReply => Box::pin(async move {
            if let Some(run) = &run {
                let reply = tools
                    .call(CallId::new("c2"), TOOL, serde_json::json!({}))
                    .map(|c| Reply::new("once more").call(c));
                if let Ok(reply) = reply {
                    let _ = run.commit_reply_async(reply).await;
                }
            }
            Finished::Run(run)
        }),
    }
}

/// Whether the saved step waits for a client's answer to `c1`.
fn waits_client(state: &stepjournal_recovery::SessionState) -> bool {
    state.saved_step().is_some_and(|reply| {
        reply
            .calls()
            .iter()
            .any(|c| c.call.as_str() == "c1" && c.kind == stepjournal_codec::CallKind::Client)
    })
}
