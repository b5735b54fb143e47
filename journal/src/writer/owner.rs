//! Ownership of runs: the runs live in this journal, the leases it holds on them (on stores
//! that keep leases), the keeper thread that renews those leases and releases them when their
//! runs end, and the journal's shutting-down flag.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use stepjournal_backends::{JournalStore, LeaseTaken, OwnerId, StoreError, StoreIdentity};
use stepjournal_codec::{RunId, SessionId};

use super::Interruption;
use super::hub::{Counters, Hub};
use super::run::{Run, WeakRun};

/// The default owner of a journal's runs: `host:pid:random`.
pub(crate) fn default_owner() -> OwnerId {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    OwnerId::new(format!("{host}:{}:{:08x}", std::process::id(), hasher.finish() as u32))
}

/// A run live in this journal.
#[derive(Debug)]
struct Live {
    run: RunId,
    handle: WeakRun,
    /// The store keeps a lease on it for this journal's owner.
    leased: bool,
    /// The keeper found the lease gone (taken over): not renewed any more.
    lost: bool,
}

/// What a lease take found.
#[derive(Debug)]
pub(crate) enum Took {
    /// The lease is held (`true`), or the store keeps none (`false`).
    Held(bool),
    /// Another owner's live lease (only when not forced).
    Refused(stepjournal_backends::Lease),
}

/// A journal's runs, their leases and its keeper. Shared by the journal's clones.
#[derive(Debug)]
pub(crate) struct Ownership {
    pub(crate) owner: OwnerId,
    pub(crate) ttl: Duration,
    pub(crate) hub: Arc<Hub>,
    /// The runs begun through this journal and not yet pruned, by session (one live run per
    /// session: a newer run of the session fences the older).
    live: Mutex<HashMap<SessionId, Live>>,
    /// Held through a whole round of [`tend`](Self::tend): rounds of the keeper and of
    /// [`Journal::keep_leases`](super::Journal::keep_leases) do not overlap, so a round that
    /// returns has released every lease of a run that ended before it began (none is left in
    /// the hands of another round still releasing it).
    tending: Mutex<()>,
    /// Leases taken for runs whose entry never handed a `Run` back (its future was dropped):
    /// released at the keeper's next round.
    orphans: Mutex<Vec<(SessionId, RunId)>>,
    shutting_down: AtomicBool,
    /// Whether the keeper thread was started (on the first lease the store kept).
    keeper: AtomicBool,
    /// Whether a keeper thread may be started at all ([`JournalOptions::lease_keeper`]).
    ///
    /// [`JournalOptions::lease_keeper`]: super::JournalOptions::lease_keeper
    keeper_allowed: bool,
    /// Tells the keeper to stop.
    stop: AtomicBool,
    /// The store this journal runs over, claimed for it in this process ([`claims`]).
    ///
    /// [`claims`]: super::claims
    store: StoreIdentity,
    /// How many runs the live list held after it was last pruned: it is pruned again once it
    /// has doubled, so that on a store without leases (no keeper) ended runs do not pile up.
    pruned_at: std::sync::atomic::AtomicUsize,
}

impl Drop for Ownership {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.hub.notify();
        self.release_claim();
    }
}

impl Ownership {
    pub(crate) fn new(
        owner: OwnerId,
        ttl: Duration,
        store: StoreIdentity,
        keeper_allowed: bool,
    ) -> Arc<Self> {
        Arc::new(Ownership {
            owner,
            ttl,
            hub: Arc::new(Hub::default()),
            live: Mutex::new(HashMap::new()),
            tending: Mutex::new(()),
            orphans: Mutex::new(Vec::new()),
            shutting_down: AtomicBool::new(false),
            keeper: AtomicBool::new(false),
            keeper_allowed,
            stop: AtomicBool::new(false),
            store,
            pruned_at: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn live(&self) -> MutexGuard<'_, HashMap<SessionId, Live>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    pub(crate) fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    /// Takes the lease on `session` for `run`, about to begin (forced: a live lease of another
    /// owner is replaced, and counted). Starts the keeper the first time the store keeps one.
    pub(crate) fn take(
        self: &Arc<Self>,
        store: &Arc<dyn JournalStore>,
        session: &SessionId,
        run: &RunId,
        force: bool,
    ) -> Result<Took, StoreError> {
        match store.take_lease(session, &self.owner, run, self.ttl, force)? {
            LeaseTaken::Taken { took_over, .. } => {
                if took_over.is_some() {
                    Counters::count(&self.hub.counters.leases_taken_over);
                }
                self.start_keeper(store);
                Ok(Took::Held(true))
            }
            LeaseTaken::HeldBy(lease) => Ok(Took::Refused(lease)),
            // NotKept, and any answer a later store version adds: no lease to keep.
            _ => Ok(Took::Held(false)),
        }
    }

    /// Releases the lease of a run that did not begin (its entry's batch did not land).
    pub(crate) fn release(&self, store: &dyn JournalStore, session: &SessionId, run: &RunId) {
        // A release that fails leaves a lease that expires by itself.
        let _ = store.release_lease(session, &self.owner, run);
    }

    /// `run` of `session` began: it is live here. An older live run of the session is fenced
    /// by it: its signal fires now.
    pub(crate) fn register(&self, session: &SessionId, run: &Run, leased: bool) {
        let live = Live { run: run.id().clone(), handle: run.downgrade(), leased, lost: false };
        let older = {
            let mut runs = self.live();
            let older = runs.insert(session.clone(), live);
            if runs.len() > self.pruned_at.load(Ordering::Relaxed).saturating_mul(2).max(64) {
                // Ended runs without a lease to release are forgotten here; the keeper releases
                // and forgets those with one.
                runs.retain(|_, l| l.leased || l.handle.is_open());
                self.pruned_at.store(runs.len(), Ordering::Relaxed);
            }
            older
        };
        if let Some(signal) = older.and_then(|o| o.handle.signal()) {
            signal.fire();
        }
    }

    /// A stop landed on `session`: the run live here, if any, is fenced; its signal fires.
    pub(crate) fn stopped(&self, session: &SessionId) {
        let signal = self.live().get(session).and_then(|l| l.handle.signal());
        if let Some(signal) = signal {
            signal.fire();
        }
    }

    /// The run of `session` live and open here, if any.
    pub(crate) fn open_run(&self, session: &SessionId) -> Option<Run> {
        let live = self.live();
        let entry = live.get(session)?;
        if !entry.handle.is_open() {
            return None;
        }
        entry.handle.upgrade()
    }

    /// Whether `run` of `session` is live and open here.
    pub(crate) fn is_live(&self, session: &SessionId, run: &RunId) -> bool {
        self.live().get(session).is_some_and(|l| &l.run == run && l.handle.is_open())
    }

    /// The runs live and open here.
    pub(crate) fn open_runs(&self) -> Vec<(SessionId, RunId, WeakRun)> {
        self.live()
            .iter()
            .filter(|(_, l)| l.handle.is_open())
            .map(|(s, l)| (s.clone(), l.run.clone(), l.handle.clone()))
            .collect()
    }

    /// A lease was taken for `run` of `session`, whose entry was dropped before it handed the
    /// run back: the keeper releases it at its next round (woken now).
    pub(crate) fn orphan(&self, session: &SessionId, run: &RunId) {
        self.orphans.lock().unwrap_or_else(|p| p.into_inner()).push((session.clone(), run.clone()));
        self.hub.notify();
    }

    /// Lets go of every run still open here ([`Interruption::ShutDown`]): each writes nothing
    /// from now on, and its signal fires. Returns them, still holding their leases (released
    /// once their writes in flight are answered: see [`release_abandoned`]).
    ///
    /// [`release_abandoned`]: Self::release_abandoned
    pub(crate) fn abandon_open(&self) -> Vec<(SessionId, Run, bool)> {
        let open: Vec<(SessionId, Live)> = {
            let mut live = self.live();
            let sessions: Vec<SessionId> =
                live.iter().filter(|(_, l)| l.handle.is_open()).map(|(s, _)| s.clone()).collect();
            sessions.into_iter().filter_map(|s| live.remove(&s).map(|l| (s, l))).collect()
        };
        let mut abandoned = Vec::with_capacity(open.len());
        for (session, live) in open {
            let Some(run) = live.handle.upgrade() else {
                // Its last handle went meanwhile: a crashed run, as any dropped one.
                if live.leased {
                    self.orphan(&session, &live.run);
                }
                continue;
            };
            run.interrupt(Interruption::ShutDown);
            abandoned.push((session, run, live.leased));
        }
        abandoned
    }

    /// Releases the lease of a run [`abandon_open`](Self::abandon_open) let go, once no write
    /// of it is in flight.
    pub(crate) fn release_abandoned(
        &self,
        store: &dyn JournalStore,
        session: &SessionId,
        run: &Run,
    ) {
        self.release(store, session, run.id());
    }

    /// One round of the keeper: releases the leases of runs that ended (or whose handles are
    /// all gone) and forgets them; renews the leases of the rest in one store call; fires the
    /// signal of each run whose lease was lost.
    pub(crate) fn tend(&self, store: &dyn JournalStore) -> Result<(), StoreError> {
        let _round = self.tending.lock().unwrap_or_else(|p| p.into_inner());
        let orphans = std::mem::take(&mut *self.orphans.lock().unwrap_or_else(|p| p.into_inner()));
        for (session, run) in &orphans {
            self.release(store, session, run);
        }
        let (ended, renew) = {
            let mut live = self.live();
            let done: Vec<SessionId> =
                live.iter().filter(|(_, l)| !l.handle.is_open()).map(|(s, _)| s.clone()).collect();
            let ended: Vec<(SessionId, Live)> =
                done.into_iter().filter_map(|s| live.remove(&s).map(|l| (s, l))).collect();
            let renew: Vec<(SessionId, RunId)> = live
                .iter()
                .filter(|(_, l)| l.leased && !l.lost)
                .map(|(s, l)| (s.clone(), l.run.clone()))
                .collect();
            (ended, renew)
        };
        for (session, live) in ended.iter().filter(|(_, l)| l.leased) {
            self.release(store, session, &live.run);
        }
        if renew.is_empty() {
            return Ok(());
        }
        let lost = store.renew_leases(&self.owner, &renew, self.ttl)?;
        let signals: Vec<_> = {
            let mut live = self.live();
            lost.iter()
                .filter_map(|session| {
                    let entry = live.get_mut(session)?;
                    entry.lost = true;
                    entry.handle.signal()
                })
                .collect()
        };
        for signal in signals {
            Counters::count(&self.hub.counters.leases_lost);
            signal.fire();
        }
        Ok(())
    }

    /// Starts the keeper thread, once: it tends every ttl/3, and whenever a run here can no
    /// longer write. It holds the ownership weakly and stops once the journal is gone.
    fn start_keeper(self: &Arc<Self>, store: &Arc<dyn JournalStore>) {
        if !self.keeper_allowed || self.keeper.swap(true, Ordering::AcqRel) {
            return;
        }
        let (weak, store, hub): (Weak<Ownership>, _, _) =
            (Arc::downgrade(self), store.clone(), self.hub.clone());
        let every = (self.ttl / 3).max(Duration::from_millis(10));
        let spawned =
            std::thread::Builder::new().name("stepjournal-leases".into()).spawn(move || {
                let mut seen = hub.generation();
                loop {
                    seen = hub.wait_thread(seen, every);
                    let Some(own) = weak.upgrade() else { return };
                    if own.stop.load(Ordering::Acquire) {
                        return;
                    }
                    // A failed round is tried again at the next.
                    let _ = own.tend(&*store);
                }
            });
        if spawned.is_err() {
            // No thread: the next lease kept tries again.
            self.keeper.store(false, Ordering::Release);
        }
    }

    /// Lets go of this journal's claim on its store (closed, or the journal gone).
    pub(crate) fn release_claim(&self) {
        super::claims::release(&self.store, (self as *const Ownership).cast());
    }

    /// Stops the keeper (at shutdown).
    pub(crate) fn stop_keeper(&self) {
        self.stop.store(true, Ordering::Release);
        self.hub.notify();
    }
}
