//! The same log read three ways: from the memory store, from the file backend on a simulated
//! disk, and exported to JSON lines and imported back. Every entry's plan must be the same over
//! all three.

use std::path::Path;
use std::sync::Arc;

use stepjournal_backends::file::sim::SimDisk;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::json::{record_from_export_line, record_to_export_line};
use stepjournal_codec::{
    CheckpointId, Entry, Event, Record, ResumeMode, RunId, Seq, SessionId, Stamped,
};
use stepjournal_recovery::{
    Config, NewRun, Plan, SessionState, ToolRegistry, forks_agree, plan, snapshots_agree,
    trims_agree,
};

/// Where the copies of a log differ, or could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mismatch {
    /// What differs, and where.
    pub(crate) what: String,
}

/// The file backend on a simulated disk that every new log of one search is written to, each
/// as a session of its own, and read back: at once from the open store, and once more at the
/// end after the store is opened again on what a process crash leaves.
pub(crate) struct FileMirror {
    disk: SimDisk,
    store: Option<FileStore>,
    /// Each session written, with the hash of its log and the choice vector that made it.
    written: Vec<(SessionId, u64, String)>,
}

const DIR: &str = "/journal";

fn file_options() -> FileOptions {
    FileOptions::new().segment_size(1 << 16)
}

impl FileMirror {
    pub(crate) fn new() -> Self {
        FileMirror { disk: SimDisk::new(), store: None, written: Vec::new() }
    }

    fn store(&mut self) -> Result<&FileStore, String> {
        if self.store.is_none() {
            let store =
                FileStore::open_with(Arc::new(self.disk.clone()), Path::new(DIR), file_options())
                    .map_err(|e| format!("opening the file store: {e}"))?;
            self.store = Some(store);
        }
        self.store.as_ref().ok_or_else(|| "the file store is not open".to_owned())
    }

    /// Writes `log` as a session of its own, in one append, and reads it back.
    fn through(&mut self, log: &[Record], hash: u64, made_by: &str) -> Result<Vec<Record>, String> {
        let session = SessionId::from_stored(format!("m-{}", self.written.len() + 1));
        let store = self.store()?;
        let stamped: Vec<Stamped> =
            log.iter().map(|r| Stamped::at(r.at, r.event.clone())).collect();
        if !stamped.is_empty() {
            store
                .append(&session, Seq(0), &stamped, Durability::Synced)
                .map_err(|e| format!("appending to the file store: {e}"))?;
        }
        let read = store.read_all(&session).map_err(|e| format!("reading the file store: {e}"))?;
        self.written.push((session, hash, made_by.to_owned()));
        // The session ids in the records are the mirror's; the events, seqs and times must be the log's.
        Ok(read
            .into_iter()
            .zip(log)
            .map(|(r, orig)| Record { session: orig.session.clone(), ..r })
            .collect())
    }

    /// Opens the store again on what a process crash leaves and reads every session written
    /// back: each must hash as the log it was written from. Returns the choice vector of the
    /// first that does not, with what differs.
    pub(crate) fn reread(
        &mut self,
        hash: impl Fn(&[Record]) -> u64,
    ) -> Result<(), (String, String)> {
        self.store = None;
        if self.written.is_empty() {
            return Ok(());
        }
        let options = file_options().read_only(true);
        let store =
            FileStore::open_with(Arc::new(self.disk.process_crash()), Path::new(DIR), options)
                .map_err(|e| ("-".to_owned(), format!("opening the file store again: {e}")))?;
        for (session, wanted, made_by) in &self.written {
            let log = store
                .read_all(session)
                .map_err(|e| (made_by.clone(), format!("reading {session} again: {e}")))?;
            if hash(&log) != *wanted {
                return Err((
                    made_by.clone(),
                    format!(
                        "{session} read after reopening the file store differs from the log written"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The log exported to JSON lines and imported back.
fn through_export(log: &[Record]) -> Result<Vec<Record>, String> {
    log.iter()
        .map(|r| {
            let line = record_to_export_line(r);
            record_from_export_line(&line)
                .map_err(|e| format!("importing the export line of seq {}: {e}", r.seq))
        })
        .collect()
}

/// The log folded.
pub(crate) fn fold(log: &[Record]) -> SessionState {
    let mut state = SessionState::default();
    for record in log {
        state.apply(&record.event);
    }
    state
}

/// The entries planned over every copy: FORMAT.md's nine forms, with the checkpoints the log
/// names (the saved step's append checkpoint, the last commit's).
fn entries(state: &SessionState) -> Vec<Entry> {
    let mut out = vec![
        Entry::Wake,
        Entry::Resume(ResumeMode::Continue),
        Entry::Resume(ResumeMode::WithMessage { message: "m".to_owned() }),
        Entry::Retry { checkpoint: None, message: None },
        Entry::Retry { checkpoint: None, message: Some("m".to_owned()) },
        Entry::NewTurn { message: "m".to_owned() },
        Entry::Stop,
    ];
    let checkpoints = state
        .saved_step()
        .map(|r| r.checkpoint.clone())
        .into_iter()
        .chain(state.last_commit().map(|c| c.checkpoint.clone()));
    for checkpoint in checkpoints {
        out.push(Entry::Resume(ResumeMode::FromCheckpoint { checkpoint: checkpoint.clone() }));
        out.push(Entry::Retry { checkpoint: Some(checkpoint), message: Some("m".to_owned()) });
    }
    out
}

/// The run `entry` begins, with fixed ids.
pub(crate) fn next_run(entry: Entry) -> NewRun {
    NewRun { run: RunId::new("run-next"), entry, commit_checkpoint: CheckpointId::new("cp-next") }
}

fn plans(log: &[Record], registry: &dyn ToolRegistry, config: &Config) -> Vec<Plan> {
    let state = fold(log);
    entries(&state)
        .into_iter()
        .map(|entry| plan(&state, &next_run(entry), registry, config))
        .collect()
}

/// Reads `log` back from the file backend and from an export, and compares the records and
/// every entry's plan with the memory store's.
pub(crate) fn compare(
    file: &mut FileMirror,
    (log, hash, made_by): (&[Record], u64, &str),
    registry: &dyn ToolRegistry,
    config: &Config,
) -> Result<(), Mismatch> {
    let wanted = plans(log, registry, config);
    let copies = [
        ("the file backend on a simulated disk", file.through(log, hash, made_by)),
        ("an export imported back", through_export(log)),
    ];
    for (how, copy) in copies {
        let copy = copy.map_err(|what| Mismatch { what: format!("{how}: {what}") })?;
        if let Some(i) = (0..log.len().max(copy.len())).find(|&i| log.get(i) != copy.get(i)) {
            return Err(Mismatch {
                what: format!("{how} differs from the memory store at seq {i}"),
            });
        }
        for (plan, memory) in plans(&copy, registry, config).iter().zip(&wanted) {
            if plan != memory {
                return Err(Mismatch {
                    what: format!("{how} gives another plan: {plan:?} instead of {memory:?}"),
                });
            }
        }
    }
    // A fold that starts at a snapshot, at committed step boundaries of the log, plans every
    // entry at every later prefix as the whole fold does.
    let events: Vec<Event> = log.iter().map(|r| r.event.clone()).collect();
    let runs: Vec<NewRun> = entries(&fold(log)).into_iter().map(next_run).collect();
    snapshots_agree(&events, &runs, registry, config, SNAPSHOT_BOUNDARIES)
        .map_err(|e| Mismatch { what: format!("a fold from a snapshot: {e}") })?;
    // Forked at committed steps, the fork plans as its whole fold and as the original.
    forks_agree(&events, &runs, registry, config, FORK_POINTS)
        .map_err(|e| Mismatch { what: format!("a fork: {e}") })?;
    // Trimmed where a trim may cut it, the kept log plans as the whole one.
    trims_agree(&events, &runs, registry, config, TRIM_POINTS)
        .map_err(|e| Mismatch { what: format!("a trim: {e}") })?;
    Ok(())
}

/// How many committed step boundaries of each log a snapshot is taken at.
const SNAPSHOT_BOUNDARIES: usize = 4;

/// How many committed steps of each log a fork is made at.
const FORK_POINTS: usize = 2;

/// How many places of each log a trim is tried at.
const TRIM_POINTS: usize = 2;
