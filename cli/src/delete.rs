//! `stepjournal delete`: deletes sessions from a store, named or by age (retention), each
//! only with `--yes`; `--dry-run` says what would go.

use std::io::Write;

use clap::Args;
use stepjournal::writer::{Clock, SystemClock};
use stepjournal_backends::{DeleteAt, JournalStore};
use stepjournal_codec::{Seq, SessionId, UnixMillis};

use super::CliError;
use super::act::open_to_write;
use super::shown::{Shown, StoreName};
use super::time::parse_since;

/// Arguments of `stepjournal delete`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal delete file:./restored s-1 --yes\n  \
stepjournal delete sqlite:journal.db s-1 s-2 --dry-run\n  \
stepjournal delete postgres://u@db/app --older-than 30d --yes\n\n\
Every named session must be in the store: if one is not, nothing is deleted. --older-than \
deletes every session whose last append is older than the duration (90s, 15m, 2h, 30d) or \
before the date or time given; a session whose run holds a live lease (a runtime is running it) \
is never deleted. The store is opened for writing (a file journal's lock: no runtime may hold \
it). There is no undo: nothing is deleted without --yes; --dry-run lists what would be.")]
pub struct DeleteArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// The sessions to delete.
    #[arg(value_name = "SESSION", required_unless_present = "older_than")]
    pub sessions: Vec<String>,
    /// Delete every session whose last append is older than this.
    #[arg(long, value_name = "AGE", conflicts_with = "sessions")]
    pub older_than: Option<String>,
    /// Delete for real.
    #[arg(long)]
    pub yes: bool,
    /// List what would be deleted; delete nothing.
    #[arg(long, conflicts_with = "yes")]
    pub dry_run: bool,
}

/// Runs `stepjournal delete`.
pub fn run(args: &DeleteArgs, out: &mut dyn Write) -> Result<(), CliError> {
    if !args.yes && !args.dry_run {
        return Err(CliError::Usage {
            option: "--yes",
            reason: "a deletion cannot be undone: add --yes to delete, or --dry-run to list \
                     what would be deleted"
                .to_owned(),
        });
    }
    let url = StoreName::of(&args.store);
    let store = if args.dry_run {
        super::store::open_read(&args.store)?
    } else {
        open_to_write(&args.store, "delete")?
    };
    let doomed = match &args.older_than {
        Some(age) => {
            let before = parse_since(age, SystemClock.now())
                .map_err(|reason| CliError::Usage { option: "--older-than", reason })?;
            older_than(&*store, &url, before)?
        }
        None => named(&*store, &url, &args.sessions)?,
    };
    if doomed.is_empty() {
        writeln!(out, "no session to delete in {url}")?;
        return Ok(());
    }
    for (s, events) in &doomed {
        if args.dry_run {
            writeln!(out, "would delete session {} ({events} events) from {url}", Shown(s))?;
            continue;
        }
        // Deleted only as it was listed: a session a runtime (or anyone) appended to since is
        // left, decided in the store with the delete.
        let deleted = store.delete_at(s, Seq(*events)).map_err(|source| CliError::Store {
            url: url.clone(),
            doing: format!("deleting session {s}"),
            source,
        })?;
        match deleted {
            DeleteAt::Deleted => {
                writeln!(out, "deleted session {} ({events} events) from {url}", Shown(s))?;
            }
            DeleteAt::Changed { tail } => writeln!(
                out,
                "left session {} in {url}: it changed after it was listed ({events} events \
                 then, {} now)",
                Shown(s),
                tail.get()
            )?,
        }
    }
    if args.dry_run {
        writeln!(out, "(a dry run: nothing was deleted)")?;
    }
    Ok(())
}

fn store_error(
    url: &StoreName,
    doing: String,
    source: stepjournal_backends::StoreError,
) -> CliError {
    CliError::Store { url: url.clone(), doing, source }
}

/// The named sessions with their event counts; one that is not there refuses them all.
fn named(
    store: &dyn JournalStore,
    url: &StoreName,
    names: &[String],
) -> Result<Vec<(SessionId, u64)>, CliError> {
    let mut sessions: Vec<SessionId> =
        names.iter().map(|s| SessionId::from_stored(s.as_str())).collect();
    sessions.sort();
    sessions.dedup();
    let mut out = Vec::with_capacity(sessions.len());
    for s in sessions {
        let tail =
            store.tail(&s).map_err(|e| store_error(url, format!("reading the tail of {s}"), e))?;
        if tail.get() == 0 {
            return Err(CliError::NoSession { url: url.clone(), session: s });
        }
        let head =
            store.head(&s).map_err(|e| store_error(url, format!("reading the head of {s}"), e))?;
        // Live by the store's clock, read with the head: never by this command's.
        if let Some(lease) = head.as_ref().and_then(|h| h.live_lease()) {
            return Err(CliError::Running {
                url: url.clone(),
                session: s,
                owner: lease.owner.to_string(),
                what: "delete",
            });
        }
        out.push((s, tail.get()));
    }
    Ok(out)
}

/// The sessions last appended to before `before`, those a runtime is running (a lease live by
/// the store's clock) left out.
fn older_than(
    store: &dyn JournalStore,
    url: &StoreName,
    before: UnixMillis,
) -> Result<Vec<(SessionId, u64)>, CliError> {
    let heads =
        store.heads().map_err(|e| store_error(url, "reading the sessions' heads".into(), e))?;
    let mut out: Vec<(SessionId, u64)> = heads
        .into_iter()
        .filter(|h| h.last_at < before)
        .filter(|h| h.live_lease().is_none())
        .map(|h| (h.session, h.tail.get()))
        .collect();
    out.sort();
    Ok(out)
}
