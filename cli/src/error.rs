//! [`CliError`]: why a subcommand failed, with what and where, and its exit status.

use std::path::PathBuf;

use stepjournal_backends::file::DamagedSession;
use stepjournal_backends::{AppendError, OpenError, StoreError};
use stepjournal_codec::SessionId;

use stepjournal::registry::RegistryError;

use super::partial::Fate;
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
        source: stepjournal::scenario::ScenarioError,
    },
    /// A JSON file given on the command line (a scenario, a `--tools` file) nests arrays and
    /// objects deeper than [`RawJson::MAX_DEPTH`](stepjournal_codec::RawJson::MAX_DEPTH).
    #[error(
        "{path}: the JSON nests {depth} arrays and objects deep; the limit is {limit}",
        path = .path.display()
    )]
    TooDeep {
        /// The file.
        path: PathBuf,
        /// How deep it nests.
        depth: usize,
        /// The limit.
        limit: usize,
    },
    /// Standard output could not be written.
    #[error("cannot write the output: {source}")]
    Write {
        /// Why.
        #[from]
        source: std::io::Error,
    },
    /// A file named on the command line could not be written.
    #[error("cannot write {path}: {source}", path = .path.display())]
    WriteFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
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
        "refusing to {command} into {url}: {} of the {from}'s sessions already exist there ({}); \
         nothing was {done}",
        .sessions.len(),
        list(.sessions),
        from = if *.command == "salvage" { "source" } else { "export" },
        done = if *.command == "salvage" { "salvaged" } else { "imported" }
    )]
    Exists {
        /// The command refused: `import` or `salvage`.
        command: &'static str,
        /// The target store's URL, its password hidden.
        url: StoreName,
        /// The sessions that exist.
        sessions: Vec<SessionId>,
    },
    /// An import stopped partway through a session: why, what became of that session, and
    /// which sessions were imported whole before it (they stay).
    #[error("{}", stopped_message(.url, .session, .cause, .fate, .whole))]
    Stopped {
        /// The target store's URL, its password hidden.
        url: StoreName,
        /// The session the import stopped in.
        session: SessionId,
        /// Why it stopped.
        #[source]
        cause: Box<StopCause>,
        /// What became of the session.
        fate: Box<Fate>,
        /// The sessions imported whole before it, in file order.
        whole: Vec<SessionId>,
    },
    /// `stepjournal demo` could not run.
    #[error("demo: {0}")]
    Demo(#[source] Box<super::demo::DemoError>),
    /// `--on-corruption skip` left damaged sessions out (every other session was read).
    #[error(
        "{url}: {} damaged part{} of the journal skipped; every other session was read",
        .damaged.len(),
        if .damaged.len() == 1 { "" } else { "s" }
    )]
    Damaged {
        /// The store's URL, its password hidden.
        url: StoreName,
        /// Each damaged session (or part no intact byte ties to a session), and where.
        damaged: Vec<DamagedSession>,
    },
    /// An export stopped partway, after writing whole sessions to its output: why, and how much
    /// the output holds (a valid export of those sessions).
    #[error(
        "{source}; the export stopped after writing {sessions} whole session(s), {events} \
         events, to its output"
    )]
    ExportStopped {
        /// Sessions written whole before it stopped.
        sessions: u64,
        /// Their events.
        events: u64,
        /// Why it stopped.
        source: Box<CliError>,
    },
    /// A write command met a file journal whose directory lock a runtime holds.
    #[error(
        "{url}: a runtime holds the journal's lock ({lock}); a file journal has one writer, so \
         `{action}` cannot write while it runs",
        lock = .lock.display()
    )]
    Held {
        /// The store's URL.
        url: StoreName,
        /// The lock file.
        lock: PathBuf,
        /// The command refused.
        action: &'static str,
    },
    /// A session a runtime is running (its run holds a live lease) was not acted on.
    #[error(
        "{url}: session `{session}` is running (owner {owner} holds its live lease): {}",
        refused_beside_a_run(what)
    )]
    Running {
        /// The store's URL.
        url: StoreName,
        /// The session.
        session: SessionId,
        /// The lease's holder.
        owner: String,
        /// The command refused.
        what: &'static str,
    },
    /// The session writer refused an action or could not write it.
    #[error("{url}: {what} of session `{session}`: {source}")]
    Action {
        /// The store's URL.
        url: StoreName,
        /// The session.
        session: SessionId,
        /// The command.
        what: &'static str,
        /// The writer's error.
        #[source]
        source: Box<ActionError>,
    },
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

/// What the session writer answered a write command with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActionError {
    /// No session writer could be made over the store.
    #[error(transparent)]
    Journal(#[from] stepjournal::JournalError),
    /// The run the command begins (a `stop`) was refused or could not be written.
    #[error(transparent)]
    Begin(#[from] stepjournal::BeginError),
    /// The answer or decision was refused or could not be written.
    #[error(transparent)]
    Answer(#[from] stepjournal::AnswerError),
    /// The fork was refused or could not be written.
    #[error(transparent)]
    Fork(#[from] stepjournal::ForkError),
    /// The trim was refused or could not be written.
    #[error(transparent)]
    Trim(#[from] stepjournal::TrimError),
}

/// Why an import stopped partway through a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StopCause {
    /// An append failed.
    #[error("the append of its events from seq {seq} failed: {source}")]
    Append {
        /// Where the batch was to land.
        seq: u64,
        /// What the store reported.
        #[source]
        source: AppendError,
    },
    /// The file could not be read again as it was checked (it changed in between).
    #[error("reading the file again: {0}")]
    Reread(#[source] Box<CliError>),
}

fn stopped_message(
    url: &StoreName,
    session: &SessionId,
    cause: &StopCause,
    fate: &Fate,
    whole: &[SessionId],
) -> String {
    let before = match whole.len() {
        0 => "no session was imported whole before it".to_owned(),
        1 => format!("1 session was imported whole before it ({})", list(whole)),
        n => format!("{n} sessions were imported whole before it ({})", list(whole)),
    };
    format!(
        "{url}: the import stopped in session {}: {cause}; {}; {before}",
        Shown(session),
        fate.describe(url, session)
    )
}

fn list(sessions: &[SessionId]) -> String {
    let mut names: Vec<&str> = sessions.iter().take(10).map(SessionId::as_str).collect();
    if sessions.len() > names.len() {
        names.push("...");
    }
    names.join(", ")
}

/// What acting on a running session would have done, said in its refusal.
fn refused_beside_a_run(what: &str) -> String {
    match what {
        "delete" => {
            "`delete` would remove its log from under a live run; nothing was deleted".to_owned()
        }
        what => format!("`{what}` would fence that run; nothing was written"),
    }
}

impl CliError {
    /// A line that says what to do next, printed under the message where one helps.
    pub fn hint(&self) -> Option<String> {
        match self {
            CliError::Open { url, source: OpenError::Store(StoreError::Corrupt { .. }) } => {
                Some(format!(
                    "(`stepjournal verify {url}` lists every problem it has; \
                     `--on-corruption skip` reads every intact session; \
                     `stepjournal salvage {url} --to DST` copies them to a new store)"
                ))
            }
            CliError::ExportStopped { source, .. } => source.hint(),
            CliError::Running { what: "delete", .. } => Some(
                "delete it once its runtime ended the run, or `stepjournal stop` it first (a \
                 runtime deletes its own sessions with JournalStore::delete)"
                    .to_owned(),
            ),
            CliError::Running { .. } => Some(
                "act through the runtime (Journal::answer_client, Journal::decide_approval), or \
                 `stepjournal stop` it first"
                    .to_owned(),
            ),
            CliError::Held { action: "delete", .. } => Some(
                "stop the runtime first, or delete through it: the runtime API's \
                 JournalStore::delete on the store it has open"
                    .to_owned(),
            ),
            CliError::Held { .. } => Some(
                "stop the runtime first, or act through it: the runtime API's Journal::stop, \
                 Journal::answer_client and Journal::decide_approval do the same, and a runtime \
                 can offer them on its own admin surface"
                    .to_owned(),
            ),
            _ => None,
        }
    }

    /// The message followed by each cause in its `source` chain that the message does not
    /// already say (a driver's error under a store error, the OS error under it), each after
    /// `: `.
    pub fn full_message(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            let shown = cause.to_string();
            if !text.contains(&shown) {
                text.push_str(": ");
                text.push_str(&shown);
            }
            source = cause.source();
        }
        // The backend names its Rust option; the command's is `--on-corruption skip`.
        text.replace(
            "OnCorruption::TruncateAtCorruption keeps what precedes it",
            "`--on-corruption skip` reads every intact session",
        )
    }

    /// Writes the error as `main` prints it on standard error: `stepjournal: ` and the
    /// [full message](Self::full_message), then the hint, if any, on its own line. Every
    /// character that acts on a terminal is shown escaped (a stored id in the message cannot
    /// forge a line or move the cursor).
    pub fn write_report(&self, err: &mut dyn std::io::Write) -> std::io::Result<()> {
        writeln!(err, "stepjournal: {}", Shown(self.full_message()))?;
        if let CliError::Damaged { damaged, .. } = self {
            for d in damaged {
                let who = d.session.as_ref().map_or_else(
                    || "a part no intact byte ties to a session".to_owned(),
                    |s| format!("session {s}"),
                );
                writeln!(err, "  damaged: {}: {}", Shown(who), Shown(&d.what))?;
            }
        }
        if let Some(hint) = self.hint() {
            writeln!(err, "{}", Shown(hint))?;
        }
        Ok(())
    }

    /// The process exit status for this error: 1 when `verify` found problems or `--on-corruption skip` left damaged sessions out, 74 when the
    /// output (standard output or a file it names) cannot be written, 2 for every other error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Findings { .. } | CliError::Damaged { .. } => 1,
            CliError::Write { .. } | CliError::WriteFile { .. } => 74,
            CliError::ExportStopped { source, .. } => source.exit_code(),
            _ => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the driver failed")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("connection refused (os error 111)")]
    struct Inner;

    fn store_error(source: Box<dyn std::error::Error + Send + Sync>) -> CliError {
        CliError::Store {
            url: StoreName::of("postgres://u@h/db"),
            doing: "listing sessions".to_owned(),
            source: StoreError::Backend {
                backend: "postgres",
                context: "opening".to_owned(),
                source,
            },
        }
    }

    #[test]
    fn the_printed_message_holds_every_cause_once() {
        // Defect: an error's cause under its message (a driver's error under a store error)
        // was never printed: PostgreSQL's errors read "db error" or "error connecting to
        // server" and nothing more.
        let e = store_error(Box::new(Outer(Inner)));
        assert_eq!(
            e.full_message(),
            "postgres://u@h/db: listing sessions: postgres: opening: the driver failed: \
             connection refused (os error 111)"
        );
        let mut out = Vec::new();
        e.write_report(&mut out).unwrap();
        assert_eq!(String::from_utf8_lossy(&out), format!("stepjournal: {}\n", e.full_message()));
        // A cause the message already says is not said again.
        let said = store_error(Box::new(std::io::Error::other(Inner)));
        let text = said.full_message();
        assert_eq!(text.matches("os error 111").count(), 1, "{text}");
    }
}
