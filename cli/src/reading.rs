//! [`Reading`]: a store opened by a read command, with what `--on-corruption` asked for: stop
//! at the first damage (`fail`), or read every intact session and list the damaged ones
//! (`skip`). It also says how a session's open run can be told running from crashed
//! ([`Liveness`]).

use std::sync::Arc;

use clap::ValueEnum;
use stepjournal_backends::file::{DamagedSession, ReadAround, writer_is_live};
use stepjournal_backends::{JournalStore, OpenError, StoreError, StoreUrl};
use stepjournal_codec::{Record, SessionId};

use super::CliError;
use super::shown::StoreName;
use super::store::open_read;

/// What a read command does when it meets damage (`--on-corruption`, on every backend). Not
/// the file backend's `OnCorruption`, which decides whether opening cuts damaged data: reading
/// never cuts anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum OnDamage {
    /// Stop at the first damage, naming where it is (exit 2).
    #[default]
    Fail,
    /// Read every intact session, list the damaged ones on standard error, exit 1.
    Skip,
}

/// How an open run (a `run_started` with no `run_ended`) is told running from crashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// The store keeps leases (SQLite, PostgreSQL): running while its lease is live by the
    /// store's clock, as read with the session's head
    /// ([`SessionHead::live_lease`](stepjournal_backends::SessionHead::live_lease)), never by
    /// this command's clock.
    Leases,
    /// A file journal: running while a runtime holds the directory's lock.
    Lock {
        /// Whether a writer holds it.
        held: bool,
    },
    /// Nothing says (a damaged file journal read around its damage).
    Unknown,
}

/// A store opened for reading, and the damage skipped so far.
pub struct Reading {
    /// The store.
    pub store: Arc<dyn JournalStore>,
    /// How open runs are told apart.
    pub live: Liveness,
    url: String,
    mode: OnDamage,
    damaged: Vec<DamagedSession>,
}

impl Reading {
    /// The database file, for an SQLite store.
    pub fn sqlite_path(&self) -> Option<std::path::PathBuf> {
        match StoreUrl::parse(&self.url) {
            Ok(StoreUrl::Sqlite(path)) => Some(path),
            _ => None,
        }
    }
}

impl Reading {
    /// Opens `url` read-only. With [`OnDamage::Skip`], a file journal that refuses to open
    /// for damage is read around it (every session no problem names).
    pub fn open(url: &str, mode: OnDamage) -> Result<Self, CliError> {
        let file = match StoreUrl::parse(url) {
            Ok(StoreUrl::File(dir)) => Some(dir),
            _ => None,
        };
        let (store, live, damaged) = match (file, open_read(url)) {
            (Some(dir), Ok(store)) => {
                let held = writer_is_live(&dir).unwrap_or(false);
                (store, Liveness::Lock { held }, Vec::new())
            }
            (None, Ok(store)) => (store, Liveness::Leases, Vec::new()),
            (
                Some(dir),
                Err(CliError::Open {
                    source:
                        OpenError::Store(StoreError::Corrupt { .. }) | OpenError::NotASegment { .. },
                    ..
                }),
            ) if mode == OnDamage::Skip => {
                let (around, damaged) =
                    ReadAround::check(&dir).map_err(|source| CliError::Store {
                        url: StoreName::of(url),
                        doing: "checking the journal to read around its damage".to_owned(),
                        source,
                    })?;
                let store: Arc<dyn JournalStore> = Arc::new(around);
                (store, Liveness::Unknown, damaged)
            }
            (_, Err(e)) => return Err(e),
        };
        Ok(Reading { store, live, url: url.to_owned(), mode, damaged })
    }

    /// Every session of the store, by id (the intact ones, for a journal read around damage).
    pub fn sessions(&self) -> Result<Vec<SessionId>, CliError> {
        self.store.sessions().map_err(|source| CliError::Store {
            url: StoreName::of(&self.url),
            doing: "listing sessions".to_owned(),
            source,
        })
    }

    /// Every event of `session`; `None` when it is damaged and skipped (it is listed), or
    /// gone since the listing.
    pub fn read(&mut self, session: &SessionId) -> Result<Option<Vec<Record>>, CliError> {
        if self.damaged.iter().any(|d| d.session.as_ref() == Some(session)) {
            return Ok(None);
        }
        match self.store.read_all(session) {
            Ok(records) if records.is_empty() => Ok(None),
            Ok(records) => Ok(Some(records)),
            Err(e @ StoreError::Corrupt { .. }) if self.mode == OnDamage::Skip => {
                self.damaged
                    .push(DamagedSession { session: Some(session.clone()), what: e.to_string() });
                Ok(None)
            }
            Err(source) => Err(CliError::Store {
                url: StoreName::of(&self.url),
                doing: format!("reading session {session}"),
                source,
            }),
        }
    }

    /// Every event of the one session a command was asked about: a missing session is
    /// [`CliError::NoSession`]; a damaged one, skipped, is the [`CliError::Damaged`] report.
    pub fn read_one(&mut self, session: &SessionId) -> Result<Vec<Record>, CliError> {
        match self.read(session)? {
            Some(records) => Ok(records),
            None if self.damaged.iter().any(|d| d.session.as_ref() == Some(session)) => {
                Err(self.damage().unwrap_or_else(|| unreachable_damage(&self.url)))
            }
            None => {
                Err(CliError::NoSession { url: StoreName::of(&self.url), session: session.clone() })
            }
        }
    }

    /// The damage skipped, as the error the command ends with (exit 1), if there was any.
    pub fn damage(&self) -> Option<CliError> {
        (!self.damaged.is_empty()).then(|| CliError::Damaged {
            url: StoreName::of(&self.url),
            damaged: self.damaged.clone(),
        })
    }

    /// `Ok` when nothing was skipped, else the damage report.
    pub fn finish(&self) -> Result<(), CliError> {
        self.damage().map_or(Ok(()), Err)
    }

    /// Reads the store afresh where a new read needs it: a file journal opened read-only knows
    /// the batches that were there when it was opened, so it is opened again (and the lock
    /// asked again); a database store reads what is committed at every read.
    pub fn refresh(&mut self) -> Result<(), CliError> {
        if matches!(self.live, Liveness::Lock { .. } | Liveness::Unknown) {
            let fresh = Reading::open(&self.url, self.mode)?;
            self.store = fresh.store;
            self.live = fresh.live;
            self.damaged = fresh.damaged;
        }
        Ok(())
    }

    /// The store's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl std::fmt::Debug for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reading")
            .field("url", &StoreName::of(&self.url))
            .field("live", &self.live)
            .field("mode", &self.mode)
            .field("damaged", &self.damaged)
            .finish_non_exhaustive()
    }
}

fn unreachable_damage(url: &str) -> CliError {
    CliError::Usage { option: "--on-corruption", reason: format!("{url}: damage without a report") }
}
