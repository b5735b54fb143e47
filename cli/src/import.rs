//! `stepjournal import`: appends the sessions of an export to a store, each event at its seq
//! with its `at`, in batches.
//!
//! The whole file is checked before anything is written (the header, every line, each
//! session's events together and dense from seq 0, each record's size), and a session that
//! already exists in the target refuses the whole import. Then the file is read again and
//! appended.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::Value;
use stepjournal_backends::{Durability, JournalStore, OpenOptions, open_url};
use stepjournal_codec::json::record_from_export_line;
use stepjournal_codec::{Limits, Record, Seq, SessionId, Stamped};

use super::CliError;
use super::export::HEADER;
use super::shown::StoreName;
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
created when it does not exist. Each event keeps its seq and its `at`.")]
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

/// Imports the export at `path` into `store` (see the [module documentation](self)).
pub fn import(path: &Path, store: &dyn JournalStore, url: &str) -> Result<Imported, CliError> {
    let sessions = check(path)?;
    append_all(path, &sessions, store, url)
}

/// Appends a checked export's sessions, after making sure none exists in the target.
fn append_all(
    path: &Path,
    sessions: &[(SessionId, u64)],
    store: &dyn JournalStore,
    url: &str,
) -> Result<Imported, CliError> {
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
        return Err(CliError::Exists { url: StoreName::of(url), sessions: exist });
    }
    let mut lines = Lines::open(path)?;
    let mut done = Imported::default();
    let mut batch: Vec<Stamped> = Vec::new();
    let mut at: Option<(SessionId, Seq)> = None;
    let mut bytes = 0usize;
    let flush = |session: &SessionId, first: Seq, batch: &mut Vec<Stamped>, done: &mut Imported| {
        if batch.is_empty() {
            return Ok(());
        }
        store.append(session, first, batch, Durability::Synced).map_err(|source| {
            CliError::Append {
                url: StoreName::of(url),
                session: session.clone(),
                seq: first.get(),
                imported: done.sessions as usize,
                source: Box::new(source),
            }
        })?;
        done.events += batch.len() as u64;
        batch.clear();
        Ok::<(), CliError>(())
    };
    while let Some((r, len)) = lines.next_record()? {
        let same = at.as_ref().is_some_and(|(s, _)| *s == r.session);
        if !same || batch.len() >= BATCH_EVENTS || bytes + len > BATCH_BYTES {
            if let Some((s, first)) = &at {
                flush(s, *first, &mut batch, &mut done)?;
                if !same {
                    done.sessions += 1;
                }
            }
            at = Some((r.session.clone(), r.seq));
            bytes = 0;
        }
        bytes += len;
        batch.push(Stamped { at: r.at, event: r.event });
    }
    if let Some((s, first)) = &at {
        flush(s, *first, &mut batch, &mut done)?;
        done.sessions += 1;
    }
    Ok(done)
}

/// Runs `stepjournal import`.
pub fn run(args: &ImportArgs, out: &mut dyn Write) -> Result<(), CliError> {
    // The file is checked before the target is created.
    let sessions = check(&args.file)?;
    let store = open_url(&args.to, OpenOptions::create())
        .map_err(|source| CliError::Open { url: StoreName::of(&args.to), source })?;
    let done = append_all(&args.file, &sessions, &*store, &args.to)?;
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
