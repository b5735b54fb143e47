//! What becomes of a session an import did not finish: removed, found whole after all, or left
//! and named with the command that deletes it.
//!
//! An append that failed on a store still trusted (an ordinary error) left exactly the batches
//! acknowledged before it: the session is deleted on that store. A store that may be poisoned,
//! or an append whose outcome is unknown, is not trusted: it is dropped and the store opened
//! again, which reads what is really stored; the session is then counted there and deleted if
//! it is not whole.

use std::sync::Arc;

use stepjournal_backends::{JournalStore, OpenError};
use stepjournal_codec::SessionId;

use super::shown::{Shown, StoreName};

/// Opens the import's target again.
pub type Reopen<'a> = &'a dyn Fn() -> Result<Arc<dyn JournalStore>, OpenError>;

/// What became of the session an import stopped in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fate {
    /// None of its events landed.
    NoneLanded,
    /// The events that had landed were deleted: the store holds none of the session.
    Removed {
        /// How many had landed.
        events: u64,
    },
    /// The store, opened again, holds the whole session: the append whose outcome was unknown
    /// had landed.
    LandedWhole {
        /// Its events.
        events: u64,
    },
    /// Part of the session is in the store and could not be deleted.
    Left {
        /// Events in the store.
        events: u64,
        /// Events the session has in the export.
        of: u64,
        /// Why they could not be deleted.
        why: String,
    },
    /// Another writer appended to the session meanwhile: it is left as it is.
    Contended {
        /// Events of this import that had landed in it.
        ours: u64,
    },
    /// The store could not be opened again to learn what landed.
    Unknown {
        /// Why.
        why: String,
    },
}

impl Fate {
    /// Whether the session is in the store whole.
    pub fn is_whole(&self) -> bool {
        matches!(self, Fate::LandedWhole { .. })
    }

    /// What became of `session` of `url`, as a sentence with what to do next where something
    /// is left to do.
    pub fn describe(&self, url: &StoreName, session: &SessionId) -> String {
        let delete = format!("`stepjournal delete {url} {} --yes`", Shown(session));
        match self {
            Fate::NoneLanded => "none of its events are in the store".to_owned(),
            Fate::Removed { events } => format!(
                "the {events} of its events that had landed were deleted: the store holds none \
                 of it"
            ),
            Fate::LandedWhole { events } => format!(
                "the store, opened again, holds all {events} of its events: the append landed \
                 after all, so it is imported whole"
            ),
            Fate::Left { events, of, why } => format!(
                "{events} of its {of} events are in the store and could not be deleted ({}): \
                 delete the session with {delete} before importing it again",
                Shown(why)
            ),
            Fate::Contended { ours } => format!(
                "another writer appended to it meanwhile, so it is left as it is ({ours} of its \
                 events from this import in it)"
            ),
            Fate::Unknown { why } => format!(
                "the store could not be opened again to learn how much of it landed ({}): look \
                 with `stepjournal show {url} {}` and, if it is there, delete it with {delete}",
                Shown(why),
                Shown(session)
            ),
        }
    }
}

/// A session the import stopped in.
#[derive(Debug)]
pub struct Unfinished<'a> {
    /// The session.
    pub session: &'a SessionId,
    /// Its events in the export.
    pub events: u64,
    /// Its events acknowledged before the failure.
    pub landed: u64,
    /// Whether the store's answers can be trusted still: the failure was an ordinary error,
    /// not a poisoning failure or an unknown outcome.
    pub trusted: bool,
    /// Whether the failure was a conflict: another writer holds the session's tail.
    pub conflict: bool,
}

/// Removes what landed of the unfinished session, opening the store again when its handle is
/// not trusted; says what became of it.
pub fn settle(store: Arc<dyn JournalStore>, reopen: Reopen<'_>, u: &Unfinished<'_>) -> Fate {
    if u.conflict {
        return if u.landed == 0 { Fate::NoneLanded } else { Fate::Contended { ours: u.landed } };
    }
    if u.trusted {
        if u.landed == 0 {
            return Fate::NoneLanded;
        }
        if store.delete(u.session).is_ok() {
            return Fate::Removed { events: u.landed };
        }
    }
    // The handle's view may be wrong (or it is poisoned): what is stored is what a new open
    // reads. A file journal's writer lock goes with the old handle.
    drop(store);
    let store = match reopen() {
        Ok(store) => store,
        Err(e) => return Fate::Unknown { why: e.to_string() },
    };
    let tail = match store.tail(u.session) {
        Ok(tail) => tail.get(),
        Err(e) => return Fate::Unknown { why: e.to_string() },
    };
    if tail == 0 {
        Fate::NoneLanded
    } else if tail >= u.events {
        Fate::LandedWhole { events: u.events }
    } else {
        match store.delete(u.session) {
            Ok(_) => Fate::Removed { events: tail },
            Err(e) => Fate::Left { events: tail, of: u.events, why: e.to_string() },
        }
    }
}
