//! The store the actors share: the memory store's logs, the leases it keeps by the one lease
//! rule (`stepjournal_backends::lease`) on a logical clock of its own, and a gate that holds
//! every asynchronous operation (append, read, tail) until the search lets its actor go on.
//!
//! Each actor reaches the store through its own [`Handle`], which stands for a process of its
//! own ([`StoreIdentity::OwnProcess`]): several journals run over one store here on purpose,
//! as several processes would. The synchronous calls (heads, a session's whole log, a lease's
//! take, renewal, release, a delete) happen at once, inside the actor's step that makes them.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use stepjournal_backends::lease::{Decision, decide, expiry};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_backends::{
    AppendAck, AppendError, AppendFuture, Completer, Durability, JournalStore, Lease, LeaseTaken,
    OwnerId, SessionHead, StoreError, StoreFuture, StoreIdentity,
};
use stepjournal_codec::json::event_to_json;
use stepjournal_codec::{Event, Record, RunId, Seq, SessionId, Stamped, UnixMillis};

/// An actor's number: its place in the variant's list of actors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ActorId(pub(crate) usize);

/// A batch that landed, with who wrote it and in which of its operations.
#[derive(Debug, Clone)]
pub(crate) struct Landed {
    pub(crate) actor: ActorId,
    /// The operation the actor was in (`recover`, `decide`, `stop`, `new_turn`, ...).
    pub(crate) during: &'static str,
    pub(crate) session: SessionId,
    pub(crate) at: Seq,
    pub(crate) events: Vec<Event>,
    /// Deletes of any session made before it landed.
    pub(crate) deletes_before: usize,
    /// The session's tail when the actor began the operation, with the deletes made by then.
    pub(crate) began_at: (Seq, usize),
}

/// A lease taken, as the store's clock judged the one it replaced.
#[derive(Debug, Clone)]
pub(crate) struct Taken {
    pub(crate) actor: ActorId,
    pub(crate) session: SessionId,
    pub(crate) forced: bool,
    /// The lease replaced, if another owner's, with whether it was live by the store's clock.
    pub(crate) replaced: Option<(Lease, bool)>,
}

/// An asynchronous operation held at the gate.
enum Held {
    Append {
        session: SessionId,
        expected: Seq,
        events: Vec<Stamped>,
        durability: Durability,
        done: Completer<Result<AppendAck, AppendError>>,
    },
    Read {
        session: SessionId,
        range: Range<Seq>,
        done: Completer<Result<Vec<Record>, StoreError>>,
    },
    Tail {
        session: SessionId,
        done: Completer<Result<Seq, StoreError>>,
    },
}

impl Held {
    /// What the operation is, for the state's key: its kind and what it carries.
    fn key(&self, h: &mut DefaultHasher) {
        match self {
            Held::Append { session, expected, events, .. } => {
                ("append", session.as_str(), expected.get()).hash(h);
                for e in events {
                    event_to_json(&e.event).hash(h);
                }
            }
            Held::Read { session, range, .. } => {
                ("read", session.as_str(), range.start.get(), range.end.get()).hash(h);
            }
            Held::Tail { session, .. } => ("tail", session.as_str()).hash(h),
        }
    }

    fn is_append(&self) -> bool {
        matches!(self, Held::Append { .. })
    }
}

/// What the store holds besides the logs.
#[derive(Default)]
struct Books {
    /// The store's clock, unix ms.
    now: u64,
    leases: BTreeMap<SessionId, Lease>,
    /// The operations waiting at the gate, by actor (at most one each: an actor's future waits
    /// on one store operation at a time).
    held: BTreeMap<ActorId, Held>,
    /// The operation each actor is in, for the batches it lands, with the session's tail and
    /// the deletes when it began.
    during: BTreeMap<ActorId, (&'static str, Seq, usize)>,
    /// What each actor received from the store during its operation, hashed (the times
    /// aside): with the world, what its future's state was made of.
    inputs: BTreeMap<ActorId, u64>,
    landed: Vec<Landed>,
    taken: Vec<Taken>,
    deletes: usize,
    /// Appends acknowledged to a caller: session, first seq, events.
    acked: Vec<(SessionId, Seq, Vec<Event>, usize)>,
}

/// The store the actors share.
pub(crate) struct Shared {
    logs: MemoryStore,
    books: Mutex<Books>,
}

impl Shared {
    /// An empty store whose clock reads `now`.
    pub(crate) fn new(now: u64) -> Arc<Self> {
        let books = Books { now, ..Books::default() };
        Arc::new(Shared { logs: MemoryStore::new(), books: Mutex::new(books) })
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store's clock.
    pub(crate) fn now(&self) -> u64 {
        self.books().now
    }

    /// Time passes: the store's clock moves on by `by` ms.
    pub(crate) fn advance(&self, by: u64) {
        let mut books = self.books();
        books.now = books.now.saturating_add(by);
    }

    /// `actor` begins `operation` on `session`: what it receives from now on is its own.
    pub(crate) fn begin(&self, actor: ActorId, operation: &'static str, session: &SessionId) {
        let tail = self.logs.tail(session).unwrap_or(Seq(0));
        let mut books = self.books();
        let deletes = books.deletes;
        books.during.insert(actor, (operation, tail, deletes));
        books.inputs.insert(actor, 0);
    }

    fn received(&self, actor: ActorId, what: impl FnOnce(&mut DefaultHasher)) {
        let mut books = self.books();
        let mut h = DefaultHasher::new();
        books.inputs.get(&actor).copied().unwrap_or(0).hash(&mut h);
        what(&mut h);
        books.inputs.insert(actor, h.finish());
    }

    /// Whether `actor` waits at the gate, and whether on an append.
    pub(crate) fn waiting(&self, actor: ActorId) -> Option<bool> {
        self.books().held.get(&actor).map(Held::is_append)
    }

    /// Lets `actor`'s held operation go: it is carried out now and its future completed.
    pub(crate) fn release(&self, actor: ActorId) {
        let held = self.books().held.remove(&actor);
        match held {
            Some(Held::Append { session, expected, events, durability, done }) => {
                let result = self.append_now(actor, &session, expected, &events, durability);
                done.complete(result);
            }
            Some(Held::Read { session, range, done }) => {
                let result = self.logs.read(&session, range);
                self.received(actor, |h| hash_records(h, &result));
                done.complete(result);
            }
            Some(Held::Tail { session, done }) => {
                let result = self.logs.tail(&session);
                self.received(actor, |h| format!("{result:?}").hash(h));
                done.complete(result);
            }
            None => {}
        }
    }

    /// Forgets `actor`'s held operation: its future is gone, the operation never reached the
    /// store.
    pub(crate) fn forget(&self, actor: ActorId) {
        self.books().held.remove(&actor);
    }

    fn append_now(
        &self,
        actor: ActorId,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        let result = self.logs.append(session, expected, events, durability);
        let mut books = self.books();
        if result.is_ok() {
            let (during, began, deletes) =
                books.during.get(&actor).copied().unwrap_or(("?", Seq(0), usize::MAX));
            let plain: Vec<Event> = events.iter().map(|s| s.event.clone()).collect();
            let deletes_before = books.deletes;
            books.acked.push((session.clone(), expected, plain.clone(), deletes_before));
            books.landed.push(Landed {
                actor,
                during,
                session: session.clone(),
                at: expected,
                events: plain,
                deletes_before,
                began_at: (began, deletes),
            });
        }
        drop(books);
        self.received(actor, |h| match &result {
            Ok(ack) => ("ok", ack.first.get(), ack.next.get()).hash(h),
            Err(AppendError::Conflict { actual, .. }) => ("conflict", actual.get()).hash(h),
            Err(e) => e.to_string().hash(h),
        });
        result
    }

    /// The batches landed so far, in order.
    pub(crate) fn landed(&self) -> Vec<Landed> {
        self.books().landed.clone()
    }

    /// The leases taken so far, in order.
    pub(crate) fn taken(&self) -> Vec<Taken> {
        self.books().taken.clone()
    }

    /// The appends acknowledged, each with the number of deletes made before it.
    pub(crate) fn acked(&self) -> Vec<(SessionId, Seq, Vec<Event>, usize)> {
        self.books().acked.clone()
    }

    /// How many sessions were deleted.
    pub(crate) fn deletes(&self) -> usize {
        self.books().deletes
    }

    /// Every session's log.
    pub(crate) fn logs(&self) -> Vec<(SessionId, Vec<Record>)> {
        let sessions = self.logs.sessions().unwrap_or_default();
        sessions
            .into_iter()
            .map(|s| {
                let log = self.logs.read_all(&s).unwrap_or_default();
                (s, log)
            })
            .collect()
    }

    /// The store's part of the state's key: each session's events (their times aside: no
    /// invariant and no decision reads them), the leases and the clock, the operations held
    /// and what each actor received in its operation.
    pub(crate) fn key(&self, h: &mut DefaultHasher) {
        for (session, log) in self.logs() {
            session.as_str().hash(h);
            hash_records(h, &Ok(log));
        }
        let books = self.books();
        books.now.hash(h);
        for (session, lease) in &books.leases {
            (session.as_str(), lease.owner.as_str(), lease.run.as_str(), lease.expires.get())
                .hash(h);
        }
        for (actor, held) in &books.held {
            actor.hash(h);
            held.key(h);
        }
        for (actor, inputs) in &books.inputs {
            (actor, inputs).hash(h);
        }
        books.deletes.hash(h);
    }
}

fn hash_records(h: &mut DefaultHasher, records: &Result<Vec<Record>, StoreError>) {
    match records {
        Ok(records) => {
            records.len().hash(h);
            for r in records {
                (r.seq.get(), event_to_json(&r.event)).hash(h);
            }
        }
        Err(e) => e.to_string().hash(h),
    }
}

/// Which clock a handle judges leases by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Judge {
    /// The store's own: the rule.
    Store,
    /// The actor's clock (the store's, moved by its skew): a planted bug.
    Actor,
}

/// One actor's handle on the shared store: a process of its own.
pub(crate) struct Handle {
    shared: Arc<Shared>,
    actor: ActorId,
    /// The actor's clock minus the store's, ms.
    skew: i64,
    judge: Judge,
    /// Whether its asynchronous operations wait at the gate (the actors'), or are carried out
    /// at once (the setup's, before the actors start).
    gated: bool,
}

impl Handle {
    pub(crate) fn new(shared: Arc<Shared>, actor: ActorId, skew: i64, judge: Judge) -> Self {
        Handle { shared, actor, skew, judge, gated: true }
    }

    /// A handle whose operations are carried out at once: the setup's.
    pub(crate) fn ungated(shared: Arc<Shared>, actor: ActorId) -> Self {
        Handle { shared, actor, skew: 0, judge: Judge::Store, gated: false }
    }

    /// The time by which this handle judges leases: the store's clock, unless planted.
    fn judging_now(&self, books: &Books) -> UnixMillis {
        match self.judge {
            Judge::Store => UnixMillis(books.now),
            Judge::Actor => UnixMillis(books.now.saturating_add_signed(self.skew)),
        }
    }

    fn hold(&self, held: Held) {
        self.shared.books().held.insert(self.actor, held);
    }
}

impl JournalStore for Handle {
    /// A process of its own: the one-journal-per-store refusal does not apply.
    fn identity(&self) -> StoreIdentity {
        StoreIdentity::OwnProcess
    }

    fn max_durability(&self) -> Durability {
        self.shared.logs.max_durability()
    }

    fn append(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> Result<AppendAck, AppendError> {
        self.shared.append_now(self.actor, session, expected, events, durability)
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        let result = self.shared.logs.read(session, range);
        self.shared.received(self.actor, |h| hash_records(h, &result));
        result
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        let result = self.shared.logs.tail(session);
        self.shared.received(self.actor, |h| format!("{result:?}").hash(h));
        result
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        self.shared.logs.sessions()
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        let deleted = self.shared.logs.delete(session)?;
        let mut books = self.shared.books();
        books.leases.remove(session);
        if deleted {
            books.deletes += 1;
        }
        Ok(deleted)
    }

    fn append_async(
        &self,
        session: &SessionId,
        expected: Seq,
        events: &[Stamped],
        durability: Durability,
    ) -> AppendFuture {
        if !self.gated {
            return StoreFuture::ready(self.append(session, expected, events, durability));
        }
        let gone = AppendError::Store(gone());
        let (future, done) = StoreFuture::pending_or(Err(gone));
        let events = events.to_vec();
        self.hold(Held::Append { session: session.clone(), expected, events, durability, done });
        future
    }

    fn read_async(
        &self,
        session: &SessionId,
        range: Range<Seq>,
    ) -> StoreFuture<Result<Vec<Record>, StoreError>> {
        if !self.gated {
            return StoreFuture::ready(self.read(session, range));
        }
        let (future, done) = StoreFuture::pending_or(Err(gone()));
        self.hold(Held::Read { session: session.clone(), range, done });
        future
    }

    fn tail_async(&self, session: &SessionId) -> StoreFuture<Result<Seq, StoreError>> {
        if !self.gated {
            return StoreFuture::ready(self.tail(session));
        }
        let (future, done) = StoreFuture::pending_or(Err(gone()));
        self.hold(Held::Tail { session: session.clone(), done });
        future
    }

    /// The memory store's heads, each with the lease it holds and the store's clock (or, with
    /// the planted bug, the actor's) beside it.
    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        let heads = self.shared.logs.heads()?;
        let books = self.shared.books();
        let now = self.judging_now(&books);
        let heads: Vec<SessionHead> = heads
            .into_iter()
            .map(|mut head| {
                head.lease = books.leases.get(&head.session).cloned();
                head.read_at = Some(now);
                head
            })
            .collect();
        drop(books);
        self.shared.received(self.actor, |h| {
            for head in &heads {
                (head.session.as_str(), head.tail.get(), format!("{:?}", head.run)).hash(h);
                head.answered_while_suspended.hash(h);
                head.live_lease().map(|l| (l.owner.as_str(), l.run.as_str())).hash(h);
            }
        });
        Ok(heads)
    }

    fn head(&self, session: &SessionId) -> Result<Option<SessionHead>, StoreError> {
        Ok(self.heads()?.into_iter().find(|h| &h.session == session))
    }

    fn take_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
        ttl: Duration,
        force: bool,
    ) -> Result<LeaseTaken, StoreError> {
        let mut books = self.shared.books();
        let now = self.judging_now(&books);
        let held = books.leases.get(session).cloned();
        let taken = match decide(held.clone(), owner, now, force) {
            Decision::Refuse(lease) => LeaseTaken::HeldBy(lease),
            Decision::Take { took_over } => {
                let store_now = UnixMillis(books.now);
                let expires = expiry(store_now, ttl);
                let lease = Lease { owner: owner.clone(), run: run.clone(), expires };
                books.leases.insert(session.clone(), lease);
                let replaced = held
                    .filter(|l| &l.owner != owner)
                    .map(|l| (l.clone(), l.is_live_at(store_now)));
                let record =
                    Taken { actor: self.actor, session: session.clone(), forced: force, replaced };
                books.taken.push(record);
                LeaseTaken::Taken { expires, took_over }
            }
            _ => LeaseTaken::NotKept,
        };
        drop(books);
        self.shared.received(self.actor, |h| match &taken {
            LeaseTaken::Taken { took_over, .. } => ("taken", took_over.is_some()).hash(h),
            other => format!("{other:?}").hash(h),
        });
        Ok(taken)
    }

    fn renew_leases(
        &self,
        owner: &OwnerId,
        runs: &[(SessionId, RunId)],
        ttl: Duration,
    ) -> Result<Vec<SessionId>, StoreError> {
        let mut books = self.shared.books();
        let expires = expiry(UnixMillis(books.now), ttl);
        let mut lost = Vec::new();
        for (session, run) in runs {
            match books.leases.get_mut(session) {
                Some(lease) if &lease.owner == owner && &lease.run == run => {
                    lease.expires = expires;
                }
                _ => lost.push(session.clone()),
            }
        }
        Ok(lost)
    }

    fn release_lease(
        &self,
        session: &SessionId,
        owner: &OwnerId,
        run: &RunId,
    ) -> Result<(), StoreError> {
        let mut books = self.shared.books();
        if books.leases.get(session).is_some_and(|l| &l.owner == owner && &l.run == run) {
            books.leases.remove(session);
        }
        Ok(())
    }
}

/// What a future waiting at the gate gets if its operation is forgotten (never seen: the
/// future was dropped with it).
fn gone() -> StoreError {
    StoreError::Contract {
        context: "an operation held at the explorer's gate".to_owned(),
        what: "a held operation is carried out before its future is polled again",
    }
}
