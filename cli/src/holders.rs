//! Whether a session's open run is held: its lease (SQLite, PostgreSQL) as the store's clock
//! judges it, or the journal's lock (file); and, on SQLite, another process holding the
//! database's write lock throughout a short watch, when the store cannot judge a lapsed lease.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use stepjournal_backends::Lease;
use stepjournal_codec::SessionId;
use stepjournal_recovery::SessionState;

use super::CliError;
use super::reading::{Liveness, Reading};
use super::shown::StoreName;

/// How long a command watches an SQLite database's write lock, held by another process,
/// before it stops judging the sessions whose leases have lapsed (their runtime may be the
/// holder, frozen inside a write transaction). An ordinary transaction holds it for
/// milliseconds.
pub const LOCK_WATCH: Duration = Duration::from_secs(1);

/// Another process that held an SQLite database's write lock all the while a command watched it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockHeld {
    /// The process holding it, as the operating system says.
    pub pid: u32,
    /// How long the command watched.
    pub watched: Duration,
}

impl std::fmt::Display for LockHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "process {} held the database's write lock for all the {} ms this command watched it: a session whose lease lapsed may be run \
             by that process, frozen inside a write transaction, so it is shown `locked`, neither \
             running nor crashed",
            self.pid,
            self.watched.as_millis()
        )
    }
}

/// Whether each session's open run is held, as the store says.
#[derive(Debug)]
pub struct Holders {
    live: Liveness,
    /// The leases live by the store's clock when their heads were read.
    leases: HashMap<SessionId, Lease>,
    /// The SQLite database whose write lock is watched, when a lapsed lease needs it.
    sqlite: Option<std::path::PathBuf>,
    /// Another process holding that write lock all the while it was watched: watched once, the
    /// first time a session's open run has no live lease.
    locked: std::cell::OnceCell<Option<LockHeld>>,
}

/// Watches the write lock of the SQLite database at `path` for up to [`LOCK_WATCH`]: `None` as
/// soon as it is free (or passes from one process to another), else who held it throughout.
fn watch_write_lock(path: &std::path::Path) -> Option<LockHeld> {
    use stepjournal_backends::sqlite::write_lock_holder;
    let started = Instant::now();
    let first = write_lock_holder(path);
    let pid = first.held_by_another()?;
    while started.elapsed() < LOCK_WATCH {
        std::thread::sleep(Duration::from_millis(10));
        if write_lock_holder(path) != first {
            return None;
        }
    }
    Some(LockHeld { pid, watched: started.elapsed() })
}

impl Holders {
    /// Reads what the store says: its leases (SQLite, PostgreSQL), each judged by the store's
    /// clock read with the heads, or the journal's lock.
    pub fn of(reading: &Reading) -> Result<Self, CliError> {
        let mut leases = HashMap::new();
        if let Liveness::Leases = reading.live {
            let heads = reading.store.heads().map_err(|source| CliError::Store {
                url: StoreName::of(reading.url()),
                doing: "reading the sessions' heads and leases".to_owned(),
                source,
            })?;
            for h in heads {
                if let Some(lease) = h.live_lease() {
                    leases.insert(h.session.clone(), lease.clone());
                }
            }
        }
        Ok(Holders::new(reading, leases))
    }

    fn new(reading: &Reading, leases: HashMap<SessionId, Lease>) -> Self {
        let sqlite = reading.sqlite_path();
        Holders { live: reading.live, leases, sqlite, locked: std::cell::OnceCell::new() }
    }

    /// Another process that held the SQLite database's write lock all the while this command
    /// watched it, if a session needed it watched.
    pub fn locked(&self) -> Option<LockHeld> {
        self.locked.get().copied().flatten()
    }

    /// The write lock watched (once).
    fn watch(&self) -> Option<LockHeld> {
        *self.locked.get_or_init(|| self.sqlite.as_deref().and_then(watch_write_lock))
    }

    /// What the store says of one session (its head alone is read).
    pub fn of_one(reading: &Reading, session: &SessionId) -> Result<Self, CliError> {
        let mut leases = HashMap::new();
        if let Liveness::Leases = reading.live {
            let head = reading.store.head(session).map_err(|source| CliError::Store {
                url: StoreName::of(reading.url()),
                doing: format!("reading the head and lease of session {session}"),
                source,
            })?;
            if let Some(lease) = head.as_ref().and_then(|h| h.live_lease()) {
                leases.insert(session.clone(), lease.clone());
            }
        }
        Ok(Holders::new(reading, leases))
    }

    /// Whether `session`'s open run is held.
    pub fn held(&self, session: &SessionId, state: &SessionState) -> Held {
        match self.live {
            Liveness::Lock { held: true } => Held::Yes,
            Liveness::Lock { held: false } => Held::No,
            Liveness::Unknown => Held::Unknown,
            Liveness::Leases => {
                let run = state.last_run().map(|r| r.run.clone());
                match self.leases.get(session) {
                    Some(l) if run.as_ref() == Some(&l.run) => Held::Yes,
                    // An ended run needs no judging: the lock is watched only for an open one.
                    _ if state.last_run_outcome().is_none() && self.watch().is_some() => {
                        Held::Locked
                    }
                    _ => Held::No,
                }
            }
        }
    }
}

/// What decides whether a session's open run is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// A runtime holds it.
    Yes,
    /// Nothing holds it.
    No,
    /// Nothing says.
    Unknown,
    /// Its lease has lapsed while another process holds the database's write lock: that may be
    /// its runtime, frozen, so nothing can be judged.
    Locked,
}
