//! The sessions of the long rows: a journal over one file store directory, whose sessions grow
//! a step at a time (one safe tool call per step, a 4 KiB result, `Durability::Buffered`), and
//! the figures read around them: the bytes a session's newest snapshot and suffix take, and the
//! process's resident memory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stepjournal::recovery::MemoryRegistry;
use stepjournal::{Journal, JournalOptions, Reply, Run};
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::record::encode_into;
use stepjournal_codec::{Call, CallId, CallKind, Entry, Limits, RawJson, Replay, SessionId};

/// The bytes of each step's tool result (its JSON).
pub const RESULT_BYTES: usize = 4096;

/// The one tool, safe to replay.
const TOOL: &str = "read";

/// A journal over a file store directory, opened (and reopened, for a wake on a freshly opened
/// store) with one snapshot policy.
pub struct Shelf {
    dir: PathBuf,
    /// `JournalOptions::snapshot_every` (0: none by policy).
    pub snapshot_every: u32,
    /// The journal and its store while open; `None` between a close and the next open.
    open: Option<(Arc<FileStore>, Journal)>,
}

impl Shelf {
    /// A shelf over `dir`, opened.
    pub fn new(dir: &Path, snapshot_every: u32) -> Result<Shelf, String> {
        let mut shelf = Shelf { dir: dir.to_owned(), snapshot_every, open: None };
        shelf.journal()?;
        Ok(shelf)
    }

    /// The open journal (opened now if closed).
    pub fn journal(&mut self) -> Result<&Journal, String> {
        if self.open.is_none() {
            let store = Arc::new(
                FileStore::open(&self.dir, FileOptions::new()).map_err(|e| format!("file: {e}"))?,
            );
            // Nothing of the reclaim thread's is left to read segments while a wake is counted.
            store.wait_reclaimed();
            let registry = MemoryRegistry::new().with_tool(TOOL, Replay::Safe);
            let options = JournalOptions::new()
                .durability(Durability::Buffered)
                .snapshot_every(self.snapshot_every);
            let journal =
                Journal::new(store.clone() as Arc<dyn JournalStore>, Arc::new(registry), options)
                    .map_err(|e| e.to_string())?;
            self.open = Some((store, journal));
        }
        self.open.as_ref().map(|(_, j)| j).ok_or_else(|| "the journal is not open".to_owned())
    }

    /// The `fdatasync` calls the open store has made (0 while closed).
    pub fn syncs(&self) -> u64 {
        self.open.as_ref().map_or(0, |(store, _)| store.stats().syncs)
    }

    /// Closes the journal and its store (every run begun through it must be dropped first) and
    /// opens them again.
    pub fn reopen(&mut self) -> Result<&Journal, String> {
        self.open = None;
        self.journal()
    }

    /// The record bytes (as encoded) of what a wake of `session` reads when it reads from the
    /// newest snapshot: the snapshot and every record after it, or the whole log without one.
    pub fn snapshot_and_suffix_bytes(&mut self, session: &SessionId) -> Result<u64, String> {
        let journal = self.journal()?;
        let records =
            journal.store().read_from_snapshot(session).map_err(|e| format!("reading: {e}"))?;
        let limits = Limits::default();
        let mut buf = Vec::with_capacity(2 * RESULT_BYTES);
        let mut total = 0u64;
        for r in &records {
            buf.clear();
            let len = encode_into(&mut buf, &r.session, r.seq, r.at, &r.event, &limits)
                .map_err(|e| format!("encoding {session} at {}: {e}", r.seq))?;
            total += len as u64;
        }
        Ok(total)
    }
}

/// One session growing a step at a time through a run of its own.
pub struct Grown {
    pub session: SessionId,
    /// The steps committed so far.
    pub steps: u64,
    /// The run it grows through; begun (`NewTurn`) when it next grows.
    run: Option<Run>,
    /// The time spent growing since the last [`take_time`](Self::take_time).
    spent: Duration,
}

impl Grown {
    pub fn new(name: &str) -> Result<Grown, String> {
        let session = SessionId::new(name).map_err(|e| e.to_string())?;
        Ok(Grown { session, steps: 0, run: None, spent: Duration::ZERO })
    }

    /// Grows by up to `n` steps, no further than `target`; when `snapshot_before` is given, the
    /// run writes a snapshot (`Run::snapshot`) once that many steps remain before `target`.
    /// The run begun for it (untimed) is kept until [`drop_run`](Self::drop_run).
    pub fn grow(
        &mut self,
        journal: &Journal,
        n: u64,
        target: u64,
        snapshot_before: Option<u64>,
    ) -> Result<(), String> {
        if self.run.is_none() {
            let entry = Entry::NewTurn { message: "go on".into() };
            let run = journal.begin_run(&self.session, entry).map_err(|e| e.to_string())?;
            self.run = Some(run);
        }
        let Some(run) = self.run.as_ref() else { return Err("no run".to_owned()) };
        let call = call();
        let result = result();
        let end = target.min(self.steps + n);
        let start = Instant::now();
        while self.steps < end {
            if let Some(before) = snapshot_before
                && self.steps > 0
                && self.steps + before == target
            {
                run.snapshot().map_err(|e| format!("snapshot of {}: {e}", self.session))?;
            }
            let reply = Reply { text: "reading".into(), calls: vec![call.clone()], metadata: None };
            let step = run.commit_reply(reply).map_err(|e| e.to_string())?;
            let body = step.start_body(&call.call).map_err(|e| e.to_string())?;
            body.finish(result.clone(), false).map_err(|e| e.to_string())?;
            step.commit().map_err(|e| e.to_string())?;
            self.steps += 1;
        }
        self.spent += start.elapsed();
        Ok(())
    }

    /// Drops the run it grows through (before its store is closed).
    pub fn drop_run(&mut self) {
        self.run = None;
    }

    /// The time spent growing since the last call.
    pub fn take_time(&mut self) -> Duration {
        std::mem::take(&mut self.spent)
    }
}

fn call() -> Call {
    Call {
        call: CallId::new("read-0"),
        tool: TOOL.into(),
        args: RawJson::parse(r#"{"path":"/srv/app/src/main.rs"}"#).unwrap_or_default(),
        kind: CallKind::Tool,
        replay: Replay::Safe,
        group: None,
        sequential: false,
    }
}

/// A tool result of exactly [`RESULT_BYTES`] bytes of JSON.
fn result() -> RawJson {
    let head = r#"{"content":""#;
    let tail = r#""}"#;
    let body = "x".repeat(RESULT_BYTES - head.len() - tail.len());
    RawJson::parse(&format!("{head}{body}{tail}")).unwrap_or_default()
}

/// The process's resident memory (`VmRSS` in `/proc/self/status`), KiB.
pub fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_four_kib_of_json() {
        assert_eq!(result().get().len(), RESULT_BYTES);
    }

    #[test]
    fn a_grown_session_holds_its_steps_and_the_snapshot_asked_for() {
        let dir = std::env::temp_dir().join(format!("sj-long-session-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let grown = (|| -> Result<(u64, Option<u64>), String> {
            let mut shelf = Shelf::new(&dir, 0)?;
            let mut s = Grown::new("grown")?;
            s.grow(shelf.journal()?, 100, 20, Some(5))?;
            s.drop_run();
            let state = shelf.reopen()?.state(&s.session).map_err(|e| e.to_string())?;
            Ok((s.steps, state.last_snapshot().map(|q| q.get())))
        })();
        let _ = std::fs::remove_dir_all(&dir);
        let (steps, snapshot) = grown.unwrap_or_default();
        assert_eq!(steps, 20);
        // 2 events to begin, 5 per step (reply, dispatch id, attempt, result, commit): 15
        // steps before it.
        assert_eq!(snapshot, Some(2 + 15 * 5));
    }
}
