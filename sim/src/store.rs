//! The store wrapper that injects append faults and remembers every acknowledged append.

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use stepjournal_backends::{AppendAck, AppendError, Durability, JournalStore, StoreError};
use stepjournal_codec::{Event, Record, Seq, SessionId, Stamped};

use super::fault::{AppendFault, Landing};
use super::medium::TearHook;

/// An append the store acknowledged: its events must be in the log at `first`, after any
/// crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acked {
    /// The session.
    pub session: SessionId,
    /// Where the batch landed.
    pub first: Seq,
    /// Its events.
    pub events: Vec<Event>,
}

/// Every acknowledged append, shared by the stores of one simulation.
pub(crate) type AckLog = Arc<Mutex<Vec<Acked>>>;

/// What the wrapper lets through.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Liveness {
    Live,
    /// The simulated process died: nothing more reaches the store.
    Dead,
    /// A failure poisoned the store: everything fails until it is opened again.
    Poisoned(String),
}

#[derive(Debug)]
struct FaultState {
    mode: Liveness,
    /// Appends since the fault was armed.
    appends: u32,
    armed: Option<(u32, AppendFault, u64)>,
    fired: Option<AppendFault>,
}

/// A [`JournalStore`] over the medium's store that fires one armed append fault and records
/// every append it acknowledged.
pub(crate) struct FaultStore {
    inner: Arc<dyn JournalStore>,
    state: Mutex<FaultState>,
    acked: AckLog,
    tear: Option<TearHook>,
}

impl std::fmt::Debug for FaultStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultStore").field("state", &self.state).finish_non_exhaustive()
    }
}

fn dead() -> StoreError {
    StoreError::Io {
        context: "simulated process".to_owned(),
        source: std::io::Error::other("the simulated process died; nothing reaches the store"),
    }
}

impl FaultStore {
    pub(crate) fn new(inner: Arc<dyn JournalStore>, acked: AckLog, tear: Option<TearHook>) -> Self {
        let state = FaultState { mode: Liveness::Live, appends: 0, armed: None, fired: None };
        FaultStore { inner, state: Mutex::new(state), acked, tear }
    }

    fn lock(&self) -> MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The medium's store, for reading what really is there.
    pub(crate) fn inner(&self) -> &Arc<dyn JournalStore> {
        &self.inner
    }

    /// Arms `fault` at the `n`-th append from now; a fault armed before is dropped.
    pub(crate) fn arm(&self, n: u32, fault: AppendFault, seed: u64) {
        let mut state = self.lock();
        state.appends = 0;
        state.armed = Some((n, fault, seed));
    }

    /// Drops any armed fault, counting appends from now.
    pub(crate) fn disarm(&self) {
        let mut state = self.lock();
        state.appends = 0;
        state.armed = None;
    }

    /// Appends asked for since the last [`arm`](Self::arm) or [`disarm`](Self::disarm).
    pub(crate) fn appends_since_armed(&self) -> u32 {
        self.lock().appends
    }

    /// The fault that fired since the last call, if one did.
    pub(crate) fn take_fired(&self) -> Option<AppendFault> {
        self.lock().fired.take()
    }

    /// The simulated process dies: nothing more reaches the store.
    pub(crate) fn kill(&self) {
        self.lock().mode = Liveness::Dead;
    }

    fn alive(&self) -> Result<(), StoreError> {
        match &self.lock().mode {
            Liveness::Live => Ok(()),
            Liveness::Dead => Err(dead()),
            Liveness::Poisoned(first) => Err(StoreError::Poisoned { first_failure: first.clone() }),
        }
    }
}

impl JournalStore for FaultStore {
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
        let fault = {
            let mut state = self.lock();
            match &state.mode {
                Liveness::Live => {}
                Liveness::Dead => return Err(dead().into()),
                Liveness::Poisoned(first) => {
                    return Err(StoreError::Poisoned { first_failure: first.clone() }.into());
                }
            }
            let n = state.appends;
            state.appends = n.saturating_add(1);
            match state.armed {
                Some((at, fault, seed)) if at == n => {
                    state.armed = None;
                    state.fired = Some(fault);
                    if let AppendFault::Crash(_) = fault {
                        state.mode = Liveness::Dead;
                    }
                    Some((n, fault, seed))
                }
                _ => None,
            }
        };
        let Some((n, fault, seed)) = fault else {
            let ack = self.inner.append(session, expected, events, durability)?;
            let acked = Acked {
                session: session.clone(),
                first: expected,
                events: events.iter().map(|s| s.event.clone()).collect(),
            };
            self.acked.lock().unwrap_or_else(|p| p.into_inner()).push(acked);
            return Ok(ack);
        };
        match fault {
            AppendFault::Crash(Landing::Lands) => {
                // Whatever the store says, the process is gone before it could be told.
                let _landed = self.inner.append(session, expected, events, durability);
                Err(dead().into())
            }
            AppendFault::Crash(Landing::Lost) => Err(dead().into()),
            AppendFault::Crash(Landing::Torn) => {
                if let Some(tear) = &self.tear {
                    tear(seed);
                    let _torn = self.inner.append(session, expected, events, durability);
                }
                Err(dead().into())
            }
            AppendFault::Fail { poisoned } => {
                let error = format!("simulated failure of append {n} since the fault was armed");
                if poisoned {
                    self.lock().mode = Liveness::Poisoned(error.clone());
                }
                Err(StoreError::Io {
                    context: format!("appending to {session} at seq {expected}"),
                    source: std::io::Error::other(error),
                }
                .into())
            }
        }
    }

    fn read(&self, session: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
        self.alive()?;
        self.inner.read(session, range)
    }

    fn tail(&self, session: &SessionId) -> Result<Seq, StoreError> {
        self.alive()?;
        self.inner.tail(session)
    }

    fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
        self.alive()?;
        self.inner.sessions()
    }

    fn delete(&self, session: &SessionId) -> Result<bool, StoreError> {
        self.alive()?;
        self.inner.delete(session)
    }
}
