//! `stepjournal import`: appends the sessions of an export to a store, each event at its seq
//! with its `at`, in batches.
//!
//! The whole file is checked before anything is written (the header, every line, each
//! session's events together and dense from seq 0, each record's size), and a session that
//! already exists in the target refuses the whole import. Then the file is read again and
//! appended, session by session. A session whose appends fail partway is deleted again, or
//! named with what is left of it ([`super::partial`]); the sessions before it stay, whole.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use serde_json::Value;
use stepjournal_backends::{AppendError, Durability, JournalStore, OpenOptions, open_url};
use stepjournal_codec::json::record_from_export_line;
use stepjournal_codec::{Limits, Record, Seq, SessionId, Stamped};

use super::CliError;
use super::error::StopCause;
use super::export::HEADER;
use super::partial::{Reopen, Unfinished, settle};
use super::progress::Progress;
use super::shown::StoreName;
use super::store::open_to_delete;
use super::time;

/// Events per append at most.
const BATCH_EVENTS: usize = 1024;
/// Bytes of export lines per append at most (well under the 64 MiB batch limit: a record is
/// smaller than its JSON line, but for its session id and fixed fields).
const BATCH_BYTES: usize = 4 << 20;

/// Arguments of `stepjournal import`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal import journal.jsonl --to sqlite:journal.db\n  \
stepjournal import journal.jsonl --to file:./restored\n\n\
FILE is what `stepjournal export` wrote. Every line is checked before anything is written, and \
the import is refused whole if any of its sessions already exists in the target. The target is \
created when it does not exist; an existing target must be a journal store (a database, schema \
or directory holding anything else is refused, unchanged). Each event keeps its seq and its \
`at`.")]
pub struct ImportArgs {
    /// The export file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The store to append to: file:PATH, sqlite:PATH or postgres://...
    #[arg(long, value_name = "STORE")]
    pub to: String,
}

/// What an import appended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Imported {
    /// Sessions appended.
    pub sessions: u64,
    /// Events appended.
    pub events: u64,
}

/// An export file's lines after the header, numbered from 2.
struct Lines {
    path: PathBuf,
    reader: BufReader<File>,
    number: u64,
    bytes: Vec<u8>,
    text: String,
}

impl Lines {
    /// Opens the file and checks its header line.
    fn open(path: &Path) -> Result<Self, CliError> {
        let file = File::open(path)
            .map_err(|source| CliError::Read { path: path.to_path_buf(), source })?;
        let mut lines = Lines {
            path: path.to_path_buf(),
            reader: BufReader::new(file),
            number: 0,
            bytes: Vec::new(),
            text: String::new(),
        };
        if !lines.next_line()? {
            return Err(
                lines.error("the file is empty: an export begins with its header line".into())
            );
        }
        let header = lines.text.trim_end_matches(['\n', '\r']);
        let value: Value = serde_json::from_str(header).map_err(|_| {
            lines.error(format!("not a stepjournal export: the first line must be {HEADER}"))
        })?;
        if value.get("format").and_then(Value::as_str) != Some("stepjournal-export") {
            return Err(
                lines.error(format!("not a stepjournal export: the first line must be {HEADER}"))
            );
        }
        match value.get("version").and_then(Value::as_u64) {
            Some(1) => Ok(lines),
            _ => Err(lines.error(format!(
                "export format version {} is not one this build reads (1)",
                value.get("version").map_or("(none)".to_owned(), Value::to_string)
            ))),
        }
    }

    fn error(&self, reason: String) -> CliError {
        CliError::Import { path: self.path.clone(), line: self.number, reason }
    }

    /// Reads the next line into `text`; a line that is not UTF-8 is an error naming its number
    /// and the byte where it stops being UTF-8.
    fn next_line(&mut self) -> Result<bool, CliError> {
        self.bytes.clear();
        self.text.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut self.bytes)
            .map_err(|source| CliError::Read { path: self.path.clone(), source })?;
        self.number += 1;
        match std::str::from_utf8(&self.bytes) {
            Ok(text) => self.text.push_str(text),
            Err(e) => {
                return Err(self.error(format!(
                    "the line is not UTF-8 (from its byte {}, counting from 1)",
                    e.valid_up_to() + 1
                )));
            }
        }
        Ok(n > 0)
    }

    /// The next event's record and its line's length; blank lines are skipped.
    fn next_record(&mut self) -> Result<Option<(Record, usize)>, CliError> {
        loop {
            if !self.next_line()? {
                return Ok(None);
            }
            let text = self.text.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                continue;
            }
            let record = record_from_export_line(text).map_err(|e| self.error(e.to_string()))?;
            return Ok(Some((record, text.len())));
        }
    }
}

/// Checks every line: each session's events together and dense from 0, each record writable.
/// Returns the sessions in file order with their event counts.
fn check(path: &Path) -> Result<Vec<(SessionId, u64)>, CliError> {
    let mut lines = Lines::open(path)?;
    let limits = Limits::default();
    let mut sessions: Vec<(SessionId, u64)> = Vec::new();
    let mut seen = HashSet::new();
    while let Some((r, _)) = lines.next_record()? {
        if sessions.last().is_none_or(|(s, _)| *s != r.session) {
            if !seen.insert(r.session.clone()) {
                return Err(lines.error(format!(
                    "session {} appears again after other sessions: an export lists each \
                     session's events together",
                    r.session
                )));
            }
            sessions.push((r.session.clone(), 0));
        }
        let expected = sessions.last().map_or(0, |(_, n)| *n);
        if expected == 0 && r.seq > Seq(0) {
            return Err(lines.error(format!(
                "session {} starts at seq {}: it was trimmed (its export starts at the kept \
                 snapshot), and an import writes each session from seq 0, so it cannot be \
                 imported; import an export made before the trim",
                r.session, r.seq
            )));
        }
        if r.seq != Seq(expected) {
            return Err(lines.error(format!(
                "session {} continues at seq {} where seq {expected} is next",
                r.session, r.seq
            )));
        }
        if !time::in_range(r.at) {
            return Err(lines.error(format!(
                "`at` {} is after {}: not a time this build takes in",
                r.at.get(),
                time::rfc3339(time::LATEST)
            )));
        }
        stepjournal_codec::record::encode(&r, &limits).map_err(|e| lines.error(e.to_string()))?;
        if let Some((_, n)) = sessions.last_mut() {
            *n += 1;
        }
    }
    Ok(sessions)
}

/// Imports the export at `path` into the store `open` opens (see the [module
/// documentation](self)). `url` names the store in messages; `open` is called once, and again
/// to learn what landed when an append failed in a way that leaves the handle untrusted.
pub fn import(path: &Path, url: &str, open: Reopen<'_>) -> Result<Imported, CliError> {
    let sessions = check(path)?;
    let store = open().map_err(|source| CliError::Open { url: StoreName::of(url), source })?;
    append_all(path, &sessions, store, url, open, &mut |_, _| {})
}

/// Refuses the import when any of its sessions exists in the target.
fn refuse_existing(
    store: &dyn JournalStore,
    sessions: &[(SessionId, u64)],
    url: &str,
) -> Result<(), CliError> {
    let mut exist = Vec::new();
    for (s, _) in sessions {
        let tail = store.tail(s).map_err(|source| CliError::Store {
            url: StoreName::of(url),
            doing: format!("reading the tail of {s}"),
            source,
        })?;
        if tail.get() > 0 {
            exist.push(s.clone());
        }
    }
    if !exist.is_empty() {
        return Err(CliError::Exists {
            command: "import",
            url: StoreName::of(url),
            sessions: exist,
        });
    }
    Ok(())
}

/// Why one session's appends stopped: the cause, and the events acknowledged before it.
struct Stop {
    cause: StopCause,
    landed: u64,
}

/// Appends a checked export's sessions, after making sure none exists in the target. A
/// session whose appends fail partway is settled (removed, or named) before the error returns.
fn append_all(
    path: &Path,
    sessions: &[(SessionId, u64)],
    store: Arc<dyn JournalStore>,
    url: &str,
    reopen: Reopen<'_>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Imported, CliError> {
    refuse_existing(&*store, sessions, url)?;
    let total: u64 = sessions.iter().map(|(_, n)| n).sum();
    let mut lines = Lines::open(path)?;
    let mut done = Imported::default();
    let mut whole = Vec::with_capacity(sessions.len());
    for (session, events) in sessions {
        if let Err(stop) = append_session(&mut lines, &*store, session, *events) {
            // Nothing was written for certain only when the store refused the batch before
            // writing it, or when the file could not be read again.
            let trusted = match &stop.cause {
                StopCause::Append { source, .. } => {
                    matches!(source, AppendError::Encode { .. } | AppendError::EmptyBatch)
                }
                _ => true,
            };
            let conflict = matches!(
                &stop.cause,
                StopCause::Append { source: AppendError::Conflict { .. }, .. }
            );
            let unfinished =
                Unfinished { session, events: *events, landed: stop.landed, trusted, conflict };
            let fate = settle(store, reopen, &unfinished);
            return Err(CliError::Stopped {
                url: StoreName::of(url),
                session: session.clone(),
                cause: Box::new(stop.cause),
                fate: Box::new(fate),
                whole,
            });
        }
        done.sessions += 1;
        done.events += events;
        whole.push(session.clone());
        progress(done.events, total);
    }
    Ok(done)
}

/// Reads a session's `events` records from `lines` and appends them in batches.
fn append_session(
    lines: &mut Lines,
    store: &dyn JournalStore,
    session: &SessionId,
    events: u64,
) -> Result<(), Stop> {
    let mut landed = 0u64;
    let mut batch: Vec<Stamped> = Vec::new();
    let mut bytes = 0usize;
    let reread = |e: CliError, landed| Stop { cause: StopCause::Reread(Box::new(e)), landed };
    while landed + (batch.len() as u64) < events {
        let Some((r, len)) = lines.next_record().map_err(|e| reread(e, landed))? else {
            let e = lines.error(format!("the file ends inside session {session}"));
            return Err(reread(e, landed));
        };
        if r.session != *session || r.seq.get() != landed + batch.len() as u64 {
            let e = lines.error(format!(
                "the file changed since it was checked: {} seq {} where {session} seq {} was",
                r.session,
                r.seq,
                landed + batch.len() as u64
            ));
            return Err(reread(e, landed));
        }
        if !batch.is_empty() && (batch.len() >= BATCH_EVENTS || bytes + len > BATCH_BYTES) {
            flush(store, session, &mut landed, &mut batch)?;
            bytes = 0;
        }
        bytes += len;
        batch.push(Stamped { at: r.at, event: r.event });
    }
    flush(store, session, &mut landed, &mut batch)
}

/// Appends the batch at `landed` and counts it landed.
fn flush(
    store: &dyn JournalStore,
    session: &SessionId,
    landed: &mut u64,
    batch: &mut Vec<Stamped>,
) -> Result<(), Stop> {
    if batch.is_empty() {
        return Ok(());
    }
    let seq = Seq(*landed);
    store.append(session, seq, batch, Durability::Synced).map_err(|source| Stop {
        cause: StopCause::Append { seq: seq.get(), source },
        landed: *landed,
    })?;
    *landed += batch.len() as u64;
    batch.clear();
    Ok(())
}

/// Runs `stepjournal import`.
pub fn run(args: &ImportArgs, out: &mut dyn Write, progress: bool) -> Result<(), CliError> {
    // The file is checked before the target is created.
    let sessions = check(&args.file)?;
    let store = open_url(&args.to, OpenOptions::create())
        .map_err(|source| CliError::Open { url: StoreName::of(&args.to), source })?;
    // Opened again only to learn what landed and delete it: writing as little as it can.
    let reopen = || open_to_delete(&args.to);
    let mut bar = Progress::new(progress, "import (events)", false);
    let done =
        append_all(&args.file, &sessions, store, &args.to, &reopen, &mut |d, t| bar.update(d, t));
    bar.finish();
    let done = done?;
    writeln!(
        out,
        "imported {} session{}, {} events into {}",
        done.sessions,
        if done.sessions == 1 { "" } else { "s" },
        done.events,
        StoreName::of(&args.to)
    )?;
    Ok(())
}
