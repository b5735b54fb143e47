//! Helpers shared by the writer's test files: a registry, calls, a journal over any store, and a
//! store wrapper that fails or poisons on a chosen append.
#![allow(
    dead_code,
    reason = "each test crate including this module uses a part of it; `expect` would be unfulfilled in some"
)]

use std::ops::Range;
use std::sync::Arc;
use std::sync::Mutex;

use stepjournal::recovery::{Config, MemoryRegistry};
use stepjournal::writer::{IdSource, Journal, JournalOptions, SequentialIds};
use stepjournal::{Refusal, WriteError};
use stepjournal_backends::{
    AppendAck, AppendError, Durability, JournalStore, StoreError, memory::MemoryStore,
};
use stepjournal_codec::{
    Call, CallId, CallKind, Event, EventKind, RawJson, Record, Replay, Seq, SessionId, Stamped,
    ToolName, UnixMillis,
};

/// The time the tests' hand-made appends (another writer's, an older writer's) are stamped
/// with.
pub const T0: UnixMillis = UnixMillis(1_700_000_000_000);

/// The tools the tests call: `set_preference` and `search` are safe; `send_email` and
/// `charge_card` are unsafe; `ask_user` is a client tool; `delete_account` is approval-gated;
/// `researcher` a remote sub-agent.
pub fn registry() -> MemoryRegistry {
    MemoryRegistry::new()
        .with_tool("set_preference", Replay::Safe)
        .with_tool("search", Replay::Safe)
        .with_tool("send_email", Replay::Unsafe)
        .with_tool("charge_card", Replay::Unsafe)
        .with_tool("ask_user", Replay::Unsafe)
        .with_tool("delete_account", Replay::Unsafe)
        .with_tool("researcher", Replay::Unsafe)
}

/// A call of `tool` with id `id`, its policy as the registry gives it.
pub fn call(id: &str, tool: &str) -> Call {
    let replay = match tool {
        "set_preference" | "search" => Replay::Safe,
        _ => Replay::Unsafe,
    };
    let kind = match tool {
        "ask_user" => CallKind::Client,
        "delete_account" => CallKind::Approval,
        "researcher" => CallKind::RemoteAgent,
        _ => CallKind::Tool,
    };
    Call {
        call: CallId::from(id),
        tool: ToolName::from(tool),
        args: RawJson::parse(r#"{"k":"v"}"#).unwrap(),
        kind,
        replay,
        group: None,
        sequential: false,
    }
}

/// The call in concurrency group `group`.
pub fn grouped(mut call: Call, group: &str) -> Call {
    call.group = Some(group.to_owned());
    call
}

/// The call in the sequential chain.
pub fn sequential(mut call: Call) -> Call {
    call.sequential = true;
    call
}

pub fn id(s: &str) -> CallId {
    CallId::from(s)
}

pub fn json(s: &str) -> RawJson {
    RawJson::parse(s).unwrap()
}

/// A session id that keeps the rule.
pub fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

pub fn session() -> SessionId {
    SessionId::new("s-1").unwrap()
}

/// One id source for every journal of a test, so ids never repeat across its runs.
pub fn ids() -> Arc<dyn IdSource> {
    Arc::new(SequentialIds::new())
}

/// A journal over `store` with the test registry and `ids`.
pub fn journal_with(store: Arc<dyn JournalStore>, ids: Arc<dyn IdSource>) -> Journal {
    Journal::new(separate(store), Arc::new(registry()), JournalOptions::new().ids(ids)).unwrap()
}

/// A journal over `store` with the test registry and `max_bodies`.
pub fn journal_max_bodies(
    store: Arc<dyn JournalStore>,
    ids: Arc<dyn IdSource>,
    max_bodies: u32,
) -> Journal {
    let options = JournalOptions::new().ids(ids).recovery(Config::new(max_bodies).unwrap());
    Journal::new(separate(store), Arc::new(registry()), options).unwrap()
}

/// A journal over a fresh memory store.
pub fn memory_journal() -> (Journal, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::new());
    (journal_with(store.clone(), ids()), store)
}

/// The kinds of the session's events, in order.
pub fn kinds(store: &dyn JournalStore, session: &SessionId) -> Vec<EventKind> {
    store.read_all(session).unwrap().iter().map(|r| r.event.kind()).collect()
}

/// The session's events, in order.
pub fn events(store: &dyn JournalStore, session: &SessionId) -> Vec<Event> {
    store.read_all(session).unwrap().into_iter().map(|r| r.event).collect()
}

/// What a [`FaultyStore`] does on its chosen append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Fail it with an I/O error, writing nothing; the store goes on accepting writes.
    Fail,
    /// Fail it with an I/O error, writing nothing; from then on every call fails `Poisoned`.
    Poison,
    /// Write it, then report `OutcomeUnknown`.
    LandUnknown,
    /// Write nothing and report `OutcomeUnknown`.
    LoseUnknown,
    /// Report `OutcomeUnknown`, and write the batch just before the next append is made (a
    /// commit that lands after the writer looked).
    LandLate,
}

/// Which appends get a fault, and whether the store is poisoned.
#[derive(Default)]
struct Faults {
    /// Appends made so far.
    appends: u64,
    /// (the append's number, its fault).
    planned: Vec<(u64, Fault)>,
    poisoned: bool,
    /// A batch to write before the next append.
    late: Option<(SessionId, Seq, Vec<Stamped>, Durability)>,
}

/// A store that injects a fault into chosen appends (counted from 1 over the store's life).
pub struct FaultyStore {
    inner: Arc<dyn JournalStore>,
    plan: Mutex<Faults>,
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn JournalStore>) -> Self {
        FaultyStore { inner, plan: Mutex::default() }
    }

    /// Injects `fault` into the append that comes `n` appends from now (1: the next one).
    pub fn fault_in(&self, n: u64, fault: Fault) {
        let mut plan = self.plan.lock().unwrap();
        let at = plan.appends + n;
        plan.planned.push((at, fault));
    }

    fn poisoned(&self) -> Result<(), StoreError> {
        if self.plan.lock().unwrap().poisoned {
            return Err(StoreError::Poisoned { first_failure: "injected write failure".into() });
        }
        Ok(())
    }
}

fn io_error() -> StoreError {
    StoreError::Io {
        context: "writing segment 00000000000000000001.seg at byte 4096".into(),
        source: std::io::Error::other("injected write failure"),
    }
}

impl JournalStore for FaultyStore {
    fn max_durability(&self) -> Durability {
        self.inner.max_durability()
    }

    fn append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        self.poisoned()?;
        let late = self.plan.lock().unwrap().late.take();
        if let Some((s, at, batch, d)) = late {
            self.inner.append(&s, at, &batch, d)?;
        }
        let fault = {
            let mut plan = self.plan.lock().unwrap();
            plan.appends += 1;
            let n = plan.appends;
            let fault = plan.planned.iter().find(|(at, _)| *at == n).map(|(_, f)| *f);
            if fault == Some(Fault::Poison) {
                plan.poisoned = true;
            }
            fault
        };
        let unknown = || AppendError::OutcomeUnknown {
            session: session.clone(),
            expected,
            reason: "injected: the connection was lost during commit".into(),
            source: None,
        };
        match fault {
            None => self.inner.append(session, expected, events, durability),
            Some(Fault::Fail | Fault::Poison) => Err(AppendError::Store(io_error())),
            Some(Fault::LandUnknown) => {
                self.inner.append(session, expected, events, durability)?;
                Err(unknown())
            }
            Some(Fault::LoseUnknown) => Err(unknown()),
            Some(Fault::LandLate) => {
                self.plan.lock().unwrap().late =
                    Some((session.clone(), expected, events.to_vec(), durability));
                Err(unknown())
            }
        }
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        self.poisoned()?;
        self.inner.read(session, range)
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        self.poisoned()?;
        self.inner.tail(session)
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        self.poisoned()?;
        self.inner.sessions()
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        self.poisoned()?;
        self.inner.delete(session)
    }
}

/// The refusal inside `e`; any other error fails the test.
pub fn refusal(e: WriteError) -> Refusal {
    match e {
        WriteError::Refused(r) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Asserts `f` is refused and that the session's log did not change; returns the refusal.
pub fn refused_without_writing<T: std::fmt::Debug>(
    store: &dyn JournalStore,
    f: impl FnOnce() -> Result<T, WriteError>,
) -> Refusal {
    let before = store.tail(&session()).unwrap();
    let r = refusal(f().unwrap_err());
    assert_eq!(store.tail(&session()).unwrap(), before, "a refusal writes nothing");
    r
}

/// `store` as another process holds it: each journal of the test stands for a process of its
/// own over the one store.
pub fn separate(store: Arc<dyn JournalStore>) -> Arc<dyn JournalStore> {
    Arc::new(stepjournal::backends::SeparateProcess(store))
}
