//! `stepjournal salvage`: copies every intact batch of a damaged store to a new store, each
//! damaged session cut at its first damage, so that work goes on on the copy. The source is
//! opened read-only and never written.

use std::io::Write;
use std::sync::Arc;

use clap::Args;
use stepjournal_backends::file::{DamagedSession, ReadAround};
use stepjournal_backends::{Durability, JournalStore, OpenOptions, StoreError, StoreUrl, open_url};
use stepjournal_codec::{Record, Seq, SessionId, Stamped};

use super::CliError;
use super::progress::Progress;
use super::shown::{Shown, StoreName};
use super::store::open_read;

/// Events per append at most.
const BATCH_EVENTS: usize = 1024;

/// Arguments of `stepjournal salvage`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  stepjournal salvage file:./journal --to file:./journal-salvaged\n  \
stepjournal salvage file:./journal --to sqlite:salvaged.db\n\n\
SRC is opened read-only and never written. Every intact session is copied whole; a damaged \
session is copied up to its first damage (its events from seq 0 until the first one that is \
damaged or missing) and named on standard error with where the damage is. DST must not hold \
any session yet; it is created when it does not exist. Each event keeps its seq and its `at`, \
and events appended together stay together. Exit status 0 when nothing was damaged, 1 when \
something was cut or left out."
)]
pub struct SalvageArgs {
    /// The damaged store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "SRC")]
    pub src: String,
    /// The new store the intact batches are copied to.
    #[arg(long, value_name = "DST")]
    pub to: String,
}

/// What a salvage copied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Salvaged {
    /// Sessions copied whole.
    pub whole: u64,
    /// Sessions copied up to their first damage, with how many events were copied.
    pub cut: Vec<(SessionId, u64)>,
    /// Events copied.
    pub events: u64,
    /// The damage found.
    pub damaged: Vec<DamagedSession>,
}

/// Where the source's sessions are read from.
enum Source {
    /// A file journal, read through its check (the damage is known up front).
    File(Box<ReadAround>),
    /// Any other store: each session read whole; one that fails to read is damaged.
    Store(Arc<dyn JournalStore>),
}

/// Copies every intact batch of `src` to `dst`, reporting progress through `progress`
/// (sessions done, sessions in all).
pub fn salvage(
    src: &str,
    dst: &str,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Salvaged, CliError> {
    if same_place(src, dst) {
        return Err(CliError::Usage {
            option: "--to",
            reason: format!("{} is the store being salvaged: give a new store", StoreName::of(dst)),
        });
    }
    let mut done = Salvaged::default();
    let source = match StoreUrl::parse(src) {
        Ok(StoreUrl::File(dir)) if dir.is_dir() => {
            let (store, damaged) = ReadAround::check(&dir).map_err(|source| CliError::Store {
                url: StoreName::of(src),
                doing: "checking the journal".to_owned(),
                source,
            })?;
            done.damaged = damaged;
            Source::File(Box::new(store))
        }
        _ => Source::Store(open_read(src)?),
    };
    let target = open_url(dst, OpenOptions { read_only: false, create: true })
        .map_err(|source| CliError::Open { url: StoreName::of(dst), source })?;
    let existing =
        target.sessions().map_err(|source| store_error(dst, "listing sessions", source))?;
    if !existing.is_empty() {
        return Err(CliError::Exists {
            command: "salvage",
            url: StoreName::of(dst),
            sessions: existing,
        });
    }
    let sessions = match &source {
        Source::File(s) => s.all_sessions(),
        Source::Store(s) => s.sessions().map_err(|e| store_error(src, "listing sessions", e))?,
    };
    let total = sessions.len() as u64;
    for (i, session) in sessions.iter().enumerate() {
        progress(i as u64, total);
        let damaged = done.damaged.iter().any(|d| d.session.as_ref() == Some(session));
        let records = match &source {
            Source::File(s) => s.prefix(session),
            Source::Store(s) => s.read_all(session),
        };
        let (records, damaged) = match (records, &source) {
            (Ok(r), _) => (r, damaged),
            (Err(e @ StoreError::Corrupt { .. }), Source::Store(store)) => {
                done.damaged
                    .push(DamagedSession { session: Some(session.clone()), what: e.to_string() });
                (prefix(&**store, src, session)?, true)
            }
            (Err(e), _) => return Err(store_error(src, &format!("reading session {session}"), e)),
        };
        copy(&*target, dst, session, &records)?;
        done.events += records.len() as u64;
        if damaged {
            done.cut.push((session.clone(), records.len() as u64));
        } else {
            done.whole += 1;
        }
    }
    progress(total, total);
    Ok(done)
}

/// A session's events from seq 0 up to the first one that does not read, read one at a time.
fn prefix(
    store: &dyn JournalStore,
    url: &str,
    session: &SessionId,
) -> Result<Vec<Record>, CliError> {
    let tail = store
        .tail(session)
        .map_err(|e| store_error(url, &format!("reading the tail of {session}"), e))?;
    let mut out = Vec::new();
    for seq in 0..tail.get() {
        match store.read(session, Seq(seq)..Seq(seq + 1)) {
            Ok(mut one) if one.len() == 1 => out.append(&mut one),
            Ok(_) | Err(StoreError::Corrupt { .. }) => break,
            Err(e) => return Err(store_error(url, &format!("reading session {session}"), e)),
        }
    }
    Ok(out)
}

fn same_place(a: &str, b: &str) -> bool {
    match (StoreUrl::parse(a), StoreUrl::parse(b)) {
        (
            Ok(StoreUrl::File(x) | StoreUrl::Sqlite(x)),
            Ok(StoreUrl::File(y) | StoreUrl::Sqlite(y)),
        ) => match (x.canonicalize(), y.canonicalize()) {
            (Ok(x), Ok(y)) => x == y,
            _ => x == y,
        },
        (Ok(StoreUrl::Postgres(x)), Ok(StoreUrl::Postgres(y))) => x == y,
        _ => false,
    }
}

fn store_error(url: &str, doing: &str, source: StoreError) -> CliError {
    CliError::Store { url: StoreName::of(url), doing: doing.to_owned(), source }
}

/// Appends the records in batches: the events of one source batch (one append time) together,
/// at most [`BATCH_EVENTS`] at once.
fn copy(
    target: &dyn JournalStore,
    url: &str,
    session: &SessionId,
    records: &[Record],
) -> Result<(), CliError> {
    let mut at = 0;
    while let Some(first) = records.get(at) {
        let len = records[at..].iter().take(BATCH_EVENTS).take_while(|r| r.at == first.at).count();
        let batch: Vec<Stamped> = records[at..at + len]
            .iter()
            .map(|r| Stamped { at: r.at, event: r.event.clone() })
            .collect();
        // The session's last batch is appended synced, which makes the batches before it
        // durable with it (the same log: a segment file, SQLite's WAL, PostgreSQL's WAL): one
        // sync per session rather than one per batch.
        let durability =
            if at + len == records.len() { Durability::Synced } else { Durability::Buffered };
        target.append(session, Seq(at as u64), &batch, durability).map_err(|e| {
            CliError::Store {
                url: StoreName::of(url),
                doing: format!("appending session {session} from seq {at}"),
                source: match e {
                    stepjournal_backends::AppendError::Store(s) => s,
                    other => StoreError::Io {
                        context: other.to_string(),
                        source: std::io::Error::other("append refused"),
                    },
                },
            }
        })?;
        at += len;
    }
    Ok(())
}

/// Runs `stepjournal salvage`.
pub fn run(args: &SalvageArgs, out: &mut dyn Write, progress: bool) -> Result<(), CliError> {
    let mut bar = Progress::new(progress, "salvage", false);
    let done = salvage(&args.src, &args.to, &mut |d, t| bar.update(d, t))?;
    bar.finish();
    let to = StoreName::of(&args.to);
    writeln!(
        out,
        "salvaged {} into {to}: {} session{} whole, {} cut at their first damage, {} events",
        StoreName::of(&args.src),
        done.whole,
        if done.whole == 1 { "" } else { "s" },
        done.cut.len(),
        done.events
    )?;
    for (s, n) in &done.cut {
        writeln!(out, "  cut: session {} kept its first {n} events", Shown(s))?;
    }
    match done.damaged.is_empty() {
        true => Ok(()),
        false => Err(CliError::Damaged { url: StoreName::of(&args.src), damaged: done.damaged }),
    }
}
