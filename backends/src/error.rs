//! The errors of the storage surfaces: opening, appending, everything else.

use std::path::PathBuf;

use stepjournal_codec::{Coded, DecodeError, EncodeError, ErrorCode, Seq, SessionId};

/// A driver's own error, kept as the source of a backend error.
pub type DriverError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A failure of a store operation other than an append's own refusals.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O operation failed. `context` says which operation and where (file, offset).
    #[error("{context}: {source}")]
    Io {
        /// What was being done, and where.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Stored bytes are damaged. `context` says where (file and offset, or session and seq).
    #[error("corrupt data at {context}: {source}")]
    Corrupt {
        /// Where.
        context: String,
        /// What the decoder found.
        #[source]
        source: DecodeError,
    },
    /// Stored bytes are of a format version newer than this build reads (a segment header or a
    /// record, [`DecodeError::NewerVersion`]): a newer stepjournal reads them. Never damage:
    /// nothing is cut or removed for it, in any mode. `context` says where.
    #[error("{context}: {source}")]
    NewerFormat {
        /// Where.
        context: String,
        /// Which part and version.
        #[source]
        source: DecodeError,
    },
    /// An earlier write or sync failed; the store refuses everything until it is reopened.
    #[error("the store is poisoned by an earlier failure ({first_failure}); reopen it")]
    Poisoned {
        /// The first failure, as it was reported.
        first_failure: String,
    },
    /// The database driver reported an error.
    #[error("{backend}: {context}: {source}")]
    Backend {
        /// `sqlite` or `postgres`.
        backend: &'static str,
        /// What was being done.
        context: String,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// The store was opened read-only.
    #[error("the store at {location} is open read-only")]
    ReadOnly {
        /// Where the store is.
        location: String,
    },
    /// The store was closed ([`JournalStore::close`](crate::JournalStore::close)): it refuses
    /// every call; open it again to go on.
    #[error("the store at {location} was closed; open it again to use it")]
    Closed {
        /// Where the store is.
        location: String,
    },
    /// The store answered against its own contract (a read that skipped sequence numbers, for
    /// example): a defect of the backend, reported by the caller that noticed it.
    #[error("{context}: the store broke its contract: {what}")]
    Contract {
        /// What was being done, and where (the session and seq).
        context: String,
        /// What the contract promised and the store did not keep.
        what: &'static str,
    },
}

/// Why an append did not land (or may not have).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppendError {
    /// The session's tail is not where the caller expected: nothing was written. The ordinary
    /// outcome of a lost race or of a fenced writer, not a failure of the store.
    #[error("conflict: the append expected the tail at {expected}, but it is at {actual}")]
    Conflict {
        /// The tail the caller gave.
        expected: Seq,
        /// The session's tail.
        actual: Seq,
    },
    /// The store cannot tell whether the batch landed (a connection lost during its commit, a
    /// write or sync that failed after bytes may have reached the disk): read the session's tail
    /// before writing again, through this store if it still reads, else after reopening it.
    #[error("the outcome of the append to {session} at {expected} is unknown: {reason}")]
    OutcomeUnknown {
        /// The session.
        session: SessionId,
        /// Where the batch was to land.
        expected: Seq,
        /// Why it cannot be known.
        reason: String,
        /// The failure that left it unknown, where there is one: the I/O error of a failed write
        /// or `fdatasync`, or a failed commit's driver error (as an I/O error of kind `Other`).
        #[source]
        source: Option<std::io::Error>,
    },
    /// The batch held no events.
    #[error("an append needs at least one event")]
    EmptyBatch,
    /// An event cannot be encoded (too large, bad session id); nothing was written.
    #[error("cannot append to {session}: {source}")]
    Encode {
        /// The session.
        session: SessionId,
        /// What the encoder refused (boxed: a rare error kept out of every append's result).
        #[source]
        source: Box<EncodeError>,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AppendError {
    /// Whether the store is poisoned (every later call fails until reopen).
    pub fn is_poisoned(&self) -> bool {
        matches!(self, AppendError::Store(StoreError::Poisoned { .. }))
    }
}

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The URL is not one this build can open.
    #[error("cannot open store `{url}`: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The URL's backend was left out of this build.
    #[error(
        "cannot open store `{url}`: the {backend} backend is not in this build (enable the `{feature}` feature)"
    )]
    FeatureDisabled {
        /// The URL given.
        url: String,
        /// The backend.
        backend: &'static str,
        /// The cargo feature that adds it.
        feature: &'static str,
    },
    /// Another process holds the journal's writer lock.
    #[error("the journal at {} is locked by another writer (lock file {})", .dir.display(), .lock.display())]
    Locked {
        /// The journal's directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// A file in the journal's directory is named like a segment but cannot be taken for one:
    /// it is not a regular file, or its header never was a segment header of this journal (and
    /// it is not what a crash leaves while creating a segment). Nothing was changed.
    #[error(
        "{} is named like a segment of the journal but {what}: refusing to open, nothing was changed (move it out of the directory if it is not the journal's)",
        .path.display()
    )]
    NotASegment {
        /// The file.
        path: PathBuf,
        /// What it is, or what is wrong with its header.
        what: String,
    },
    /// The options are inconsistent.
    #[error("invalid options: {reason}")]
    Options {
        /// What is wrong.
        reason: String,
    },
    /// Opening for writing found something that is not a journal store where one was to be
    /// created (another application's database or schema, a directory of other files): nothing
    /// was changed.
    #[error("{location} is not a stepjournal store: it holds {found}; nothing was changed")]
    NotAJournal {
        /// Where (a directory, a database file, a PostgreSQL schema).
        location: String,
        /// What was found there.
        found: String,
    },
    /// The store could not be read or prepared.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Coded for StoreError {
    fn code(&self) -> ErrorCode {
        match self {
            StoreError::Io { .. } | StoreError::Backend { .. } => ErrorCode::Store,
            StoreError::Corrupt { .. } => ErrorCode::Corrupt,
            StoreError::NewerFormat { .. } => ErrorCode::NewerFormat,
            StoreError::Poisoned { .. } => ErrorCode::Poisoned,
            StoreError::ReadOnly { .. } => ErrorCode::ReadOnly,
            StoreError::Closed { .. } => ErrorCode::Closed,
            StoreError::Contract { .. } => ErrorCode::StoreContract,
        }
    }
}

impl Coded for AppendError {
    fn code(&self) -> ErrorCode {
        match self {
            AppendError::Conflict { .. } => ErrorCode::Conflict,
            AppendError::OutcomeUnknown { .. } => ErrorCode::OutcomeUnknown,
            AppendError::EmptyBatch | AppendError::Encode { .. } => ErrorCode::Encode,
            AppendError::Store(e) => e.code(),
        }
    }
}

impl Coded for OpenError {
    fn code(&self) -> ErrorCode {
        match self {
            OpenError::Url { .. } | OpenError::FeatureDisabled { .. } => ErrorCode::InvalidUrl,
            OpenError::Locked { .. } => ErrorCode::Locked,
            OpenError::NotASegment { .. } | OpenError::NotAJournal { .. } => ErrorCode::NotAJournal,
            OpenError::Options { .. } => ErrorCode::InvalidOptions,
            OpenError::Store(e) => e.code(),
        }
    }
}
