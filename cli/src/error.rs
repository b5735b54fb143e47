//! [`CliError`]: why a subcommand failed, with what and where, and its exit status.

use std::path::PathBuf;

use stepjournal_backends::{AppendError, OpenError, StoreError};
use stepjournal_codec::SessionId;

use stepjournal::registry::RegistryError;

use super::shown::{Shown, StoreName};

/// A subcommand that failed: the message is printed on standard error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}", path = .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A scenario file is malformed.
    #[error("{path}: {source}", path = .path.display())]
    Scenario {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        #[source]
        source: stepjournal_sim::scenario::ScenarioError,
    },
    /// Standard output could not be written.
    #[error("cannot write the output: {source}")]
    Write {
        /// Why.
        #[from]
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error("{}", open_message(.url, .source))]
    Open {
        /// The store's URL, its password hidden.
        url: StoreName,
        /// Why.
        #[source]
        source: OpenError,
    },
    /// The store failed while being read or written.
    #[error("{url}: {doing}: {source}")]
    Store {
        /// The store's URL, its password hidden.
        url: StoreName,
        /// What was being done.
        doing: String,
        /// What the store reported (for damage: where, by session and seq or file and offset).
        #[source]
        source: StoreError,
    },
    /// A session named on the command line is not in the store.
    #[error("session `{session}` is not in {url} (`stepjournal sessions {url}` lists them)")]
    NoSession {
        /// The store's URL, its password hidden.
        url: StoreName,
        /// The session.
        session: SessionId,
    },
    /// An argument is not acceptable.
    #[error("{option}: {reason}")]
    Usage {
        /// The option or argument.
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A `--tools` file is not FORMAT.md's `tools` object.
    #[error("{path}: {reason}", path = .path.display())]
    Tools {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
        /// The registry's complaint, when the JSON was read.
        #[source]
        source: Option<RegistryError>,
    },
    /// A line of an export file is not acceptable; nothing was imported.
    #[error("{path} line {line}: {reason}; nothing was imported", path = .path.display())]
    Import {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// Sessions of an export already exist in the target; nothing was imported.
    #[error(
        "refusing to import into {url}: {} of the export's sessions already exist there ({}); \
         nothing was imported",
        .sessions.len(),
        list(.sessions)
    )]
    Exists {
        /// The target store's URL, its password hidden.
        url: StoreName,
        /// The sessions that exist.
        sessions: Vec<SessionId>,
    },
    /// An append of an import failed.
    #[error(
        "{url}: importing session {session} at seq {seq}: {source} ({imported} sessions were \
         imported whole before it)"
    )]
    Append {
        /// The target store's URL, its password hidden.
        url: StoreName,
        /// The session.
        session: SessionId,
        /// Where the failed batch was to land.
        seq: u64,
        /// Sessions imported before this one.
        imported: usize,
        /// What the store reported.
        #[source]
        source: Box<AppendError>,
    },
    /// `stepjournal demo` could not run.
    #[error("demo: {0}")]
    Demo(#[source] Box<super::demo::DemoError>),
    /// `verify` found problems (they are printed on standard output).
    #[error("verify found {count} problem{s} in {url}", s = if *.count == 1 { "" } else { "s" })]
    Findings {
        /// The store's URL, its password hidden.
        url: StoreName,
        /// How many.
        count: usize,
    },
}

fn open_message(url: &StoreName, source: &OpenError) -> String {
    match source {
        // These name the URL themselves.
        OpenError::Url { .. } | OpenError::FeatureDisabled { .. } => source.to_string(),
        _ => format!("cannot open {url}: {source}"),
    }
}

fn list(sessions: &[SessionId]) -> String {
    let mut names: Vec<&str> = sessions.iter().take(10).map(SessionId::as_str).collect();
    if sessions.len() > names.len() {
        names.push("...");
    }
    names.join(", ")
}

impl CliError {
    /// A line that says what to do next, printed under the message where one helps.
    pub fn hint(&self) -> Option<String> {
        match self {
            CliError::Open { url, source: OpenError::Store(StoreError::Corrupt { .. }) } => {
                Some(format!("(`stepjournal verify {url}` lists every problem it has)"))
            }
            _ => None,
        }
    }

    /// Writes the error as `main` prints it on standard error: `stepjournal: ` and the
    /// message, then the hint, if any, on its own line. Every character that acts on a terminal
    /// is shown escaped (a stored id in the message cannot forge a line or move the cursor).
    pub fn write_report(&self, err: &mut dyn std::io::Write) -> std::io::Result<()> {
        writeln!(err, "stepjournal: {}", Shown(self))?;
        if let Some(hint) = self.hint() {
            writeln!(err, "{}", Shown(hint))?;
        }
        Ok(())
    }

    /// The process exit status for this error: 1 when `verify` found problems, 74 when the
    /// output cannot be written, 2 for every other error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Findings { .. } => 1,
            CliError::Write { .. } => 74,
            _ => 2,
        }
    }
}
