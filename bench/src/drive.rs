//! The tool executor's rows (issue 14): many sessions at once, each running steps of 4 calls
//! through `Step::drive` on a 2-worker tokio runtime over the file backend (`Synced`), beside
//! the sync writer's hand-written step from 64 threads, in turns; with the process's peak
//! thread count and resident memory while `drive` runs. And the executor's own cost on the
//! memory store: `drive` beside the hand-written step of the writer's row.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use stepjournal::writer::SequentialIds;
use stepjournal::{CallCtx, Journal, JournalOptions, Reply, Run, ToolError, Tools};
use stepjournal_backends::JournalStore;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_codec::{Entry, Replay, SessionId};

use crate::appends::Measured;
use crate::args::WorkDir;
use crate::table::{Latency, Row, Section, Table};
use crate::turns::{Contender, in_turns};
use crate::writer::{APPENDS_PER_STEP, Backend, Mode, calls, output};

/// What `/proc/self/status` said at its peak while `drive` ran.
#[derive(Debug, Clone, Copy, Default)]
struct Peak {
    threads: u64,
    rss_kib: u64,
    hwm_kib: u64,
    /// The steps `drive` had taken by then, over all sessions: each run's state holds its
    /// session's history, so the resident memory grows with them.
    steps: u64,
}

/// A field of `/proc/self/status` (`Threads`, `VmRSS`, `VmHWM`): its first number.
fn status(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Samples the process's threads and memory every few milliseconds until stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Peak>,
}

impl Sampler {
    fn start() -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut peak = Peak::default();
            while !flag.load(Ordering::Relaxed) {
                peak.threads = peak.threads.max(status("Threads:").unwrap_or(0));
                peak.rss_kib = peak.rss_kib.max(status("VmRSS:").unwrap_or(0));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak.hwm_kib = status("VmHWM:").unwrap_or(0);
            peak
        });
        Sampler { stop, handle }
    }

    /// The peak; the sampler's own thread is not counted.
    fn stop(self) -> Peak {
        self.stop.store(true, Ordering::Relaxed);
        let mut peak = self.handle.join().unwrap_or_default();
        peak.threads = peak.threads.saturating_sub(1);
        peak
    }
}

/// The bench's one tool, answered at once: what the executor costs is what is measured.
fn tools() -> Tools {
    Tools::new().tool("lookup", serde_json::json!({}), Replay::Safe, |_: Value, _: CallCtx| async {
        serde_json::from_str::<Value>(output().get()).map_err(ToolError::new)
    })
}

/// A workload's runs, begun once and stepped on in every slice.
struct Sessions {
    runtime: tokio::runtime::Runtime,
    runs: Vec<Run>,
    tools: Tools,
    reply: Reply,
}

impl Sessions {
    /// `n` sessions of `journal`, begun through the sync API from 64 threads (not timed).
    fn begin(journal: &Journal, n: usize, workers: usize, tag: &str) -> Result<Sessions, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .build()
            .map_err(|e| e.to_string())?;
        let next = std::sync::atomic::AtomicUsize::new(0);
        let runs = Mutex::new(Vec::with_capacity(n));
        std::thread::scope(|scope| {
            for _ in 0..64.min(n) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return;
                        }
                        let session = SessionId::new(format!("drive-{tag}-{i}").as_str()).unwrap();
                        let entry = Entry::NewTurn { message: "bench".into() };
                        if let Ok(run) = journal.begin_run(&session, entry) {
                            runs.lock().unwrap_or_else(|p| p.into_inner()).push(run);
                        }
                    }
                });
            }
        });
        let runs = runs.into_inner().unwrap_or_else(|p| p.into_inner());
        if runs.len() != n {
            return Err(format!("only {} of {n} sessions began", runs.len()));
        }
        let reply = Reply { text: "looking".into(), calls: calls(), metadata: None };
        Ok(Sessions { runtime, runs, tools: tools(), reply })
    }

    /// Every session steps through `drive` until `budget` has passed (a step begun goes on to
    /// its commit). Its `appends` count steps; the latency is per step.
    fn slice(&self, budget: Duration) -> Result<Measured, String> {
        let until = Instant::now() + budget;
        let start = Instant::now();
        let tasks: Vec<_> = self
            .runs
            .iter()
            .map(|run| {
                let (run, tools, reply) = (run.clone(), self.tools.clone(), self.reply.clone());
                self.runtime.spawn(async move {
                    // A session's latencies are kept as plain samples and recorded into one
                    // histogram after the slice: an HDR histogram of 3 digits up to seconds is
                    // 190-380 KB, which per session would outweigh the engine's own memory.
                    let mut samples = Vec::new();
                    while Instant::now() < until {
                        let t = Instant::now();
                        let step = run
                            .commit_reply_async(reply.clone())
                            .await
                            .map_err(|e| e.to_string())?;
                        step.drive(&tools).await.map_err(|e| e.to_string())?;
                        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        samples.push(ns.max(1));
                    }
                    Ok::<_, String>(samples)
                })
            })
            .collect();
        let results = self.runtime.block_on(async {
            let mut out = Vec::with_capacity(tasks.len());
            for task in tasks {
                out.push(task.await.map_err(|e| e.to_string()));
            }
            out
        });
        let elapsed = start.elapsed();
        let mut m = Measured::empty()?;
        for r in results {
            let samples = r??;
            m.appends += samples.len() as u64;
            for ns in samples {
                m.latency.record(ns).map_err(|e| e.to_string())?;
            }
        }
        m.events = m.appends * APPENDS_PER_STEP;
        m.elapsed = elapsed;
        Ok(m)
    }
}

/// `drive` over `store` with `sessions` sessions on `workers` tokio workers, its peak process
/// figures kept in `peak`.
fn contender(
    store: Arc<dyn JournalStore>,
    file: Option<Arc<FileStore>>,
    sessions: usize,
    workers: usize,
    key: String,
    workload: String,
    peak: Arc<Mutex<Peak>>,
) -> Contender {
    let mut begun: Option<Sessions> = None;
    let tag = key.clone();
    Contender::new(
        "drive",
        key,
        workload,
        &format!("{APPENDS_PER_STEP} appends per step; latency per step"),
        Box::new(move |_round, budget| {
            if begun.is_none() {
                let options = JournalOptions::new().ids(Arc::new(SequentialIds::with_prefix(&tag)));
                let journal = Journal::new(store.clone(), Arc::new(tools()), options)
                    .map_err(|e| e.to_string())?;
                begun = Some(Sessions::begin(&journal, sessions, workers, &tag)?);
            }
            let Some(s) = begun.as_ref() else { return Err("no sessions".to_owned()) };
            let before = file.as_ref().map(|f| f.stats().syncs);
            let sampler = Sampler::start();
            let m = s.slice(budget)?;
            let seen = sampler.stop();
            let mut kept = peak.lock().unwrap_or_else(|p| p.into_inner());
            kept.threads = kept.threads.max(seen.threads);
            kept.rss_kib = kept.rss_kib.max(seen.rss_kib);
            kept.hwm_kib = kept.hwm_kib.max(seen.hwm_kib);
            kept.steps += m.appends;
            let after = file.as_ref().map(|f| f.stats().syncs);
            Ok((m, after.zip(before).map(|(a, b)| a - b)))
        }),
    )
}

fn file_store(dir: &Path, name: &str, options: FileOptions) -> Result<Arc<FileStore>, String> {
    Ok(Arc::new(FileStore::open(dir.join(name), options).map_err(|e| e.to_string())?))
}

/// The committer's queue of the bounded `drive` row: a sixteenth of the default group.
const BOUNDED_QUEUE: u64 = 256 << 10;

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    file_rows(work, table)?;
    memory_rows(work, table)
}

fn file_rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("drive-file")?;
    let sessions = work.drive_sessions();
    let drive_key = format!("drive.file.{sessions}");
    let bounded_key = format!("drive.file.{sessions}.queue-{}k", BOUNDED_QUEUE >> 10);
    let sync_key = "drive.sync-writer.file.64".to_owned();
    // Each drive contender: its store and the peak process figures seen while it ran.
    let drives = [
        (drive_key.clone(), "drive", FileOptions::new(), "the default queue bound (16 MiB)"),
        (
            bounded_key.clone(),
            "drive-bounded",
            FileOptions::new().max_queued_bytes(BOUNDED_QUEUE),
            "the committer's queue bounded to 256 KiB (max_queued_bytes)",
        ),
    ]
    .into_iter()
    .map(|(key, name, options, what)| {
        let store = file_store(&dir, name, options)?;
        Ok((key, store, what, Arc::new(Mutex::new(Peak::default()))))
    })
    .collect::<Result<Vec<_>, String>>()?;
    let mut contenders =
        vec![crate::writer::contender(&dir, Backend::File, 64, Mode::Writer)?
        .renamed(
            sync_key.clone(),
            "session writer (sync), step of 4 calls, file, Synced, 64 threads, in turn with drive"
                .to_owned(),
        )];
    for (key, store, what, peak) in &drives {
        contenders.push(contender(
            store.clone(),
            Some(store.clone()),
            sessions,
            2,
            key.clone(),
            format!(
                "drive, step of 4 calls, file, Synced, {sessions} sessions on 2 tokio workers, \
                 {what}"
            ),
            peak.clone(),
        ));
    }
    let turned = in_turns(work, contenders)?;
    let sync_rate =
        turned.iter().find(|t| t.key == sync_key).map_or(0.0, |t| t.measured.appends_per_sec());
    for t in turned {
        let m = &t.measured;
        let appends = m.appends_per_sec() * APPENDS_PER_STEP as f64;
        let mut note = format!("{appends:.0} appends/s; {}", t.note);
        if let Some((_, store, _, peak)) = drives.iter().find(|(key, ..)| *key == t.key) {
            let peak = *peak.lock().unwrap_or_else(|p| p.into_inner());
            let stats = store.stats();
            note = format!(
                "{:.2}x the sync writer's steps/s from 64 threads; peak {} threads, RSS {} MiB \
                 (high-water {} MiB, {} KiB per session, each after {:.1} steps on average) \
                 while it ran; the committer's queue held at most {} KiB, {} of {} appends \
                 waited for room in it, the largest group {} appends; appends are async: the \
                 file backend's committer thread writes and syncs them and completes their \
                 futures, no worker blocks on one; {note}",
                if sync_rate > 0.0 { m.appends_per_sec() / sync_rate } else { 0.0 },
                peak.threads,
                peak.rss_kib >> 10,
                peak.hwm_kib >> 10,
                peak.rss_kib / sessions.max(1) as u64,
                peak.steps as f64 / sessions.max(1) as f64,
                stats.most_queued_bytes >> 10,
                stats.waited_for_room,
                stats.appends,
                store.metrics().max_group,
            );
        }
        table.push(
            Row::new(
                Section::Writer,
                t.key,
                t.group,
                t.workload,
                m.appends_per_sec(),
                "steps/s",
                m.elapsed.as_secs_f64(),
            )
            .latency(Latency::of(&m.latency))
            .fsyncs(t.syncs.map(|f| f as f64 / (m.appends * APPENDS_PER_STEP).max(1) as f64))
            .note(note),
        );
    }
    drop(drives);
    work.clear(&dir);
    Ok(())
}

fn memory_rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("drive-memory")?;
    let hand_key = "drive.hand-written.memory.1".to_owned();
    let drive_key = "drive.memory.1".to_owned();
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let contenders = vec![
        crate::writer::contender(&dir, Backend::Memory, 1, Mode::Writer)?.renamed(
            hand_key.clone(),
            "hand-written step (sync writer), 4 calls, memory store, 1 session".to_owned(),
        ),
        contender(
            store,
            None,
            1,
            1,
            drive_key.clone(),
            "drive, step of 4 calls, memory store, 1 session".to_owned(),
            Arc::new(Mutex::new(Peak::default())),
        ),
    ];
    let turned = in_turns(work, contenders)?;
    let hand =
        turned.iter().find(|t| t.key == hand_key).map_or(0.0, |t| t.measured.appends_per_sec());
    for t in turned {
        let m = &t.measured;
        let mut note = t.note.clone();
        if t.key == drive_key && hand > 0.0 {
            note = format!(
                "{:.2}x the hand-written step's steps/s: the executor's own cost; {note}",
                m.appends_per_sec() / hand
            );
        }
        table.push(
            Row::new(
                Section::Writer,
                t.key,
                t.group,
                t.workload,
                m.appends_per_sec(),
                "steps/s",
                m.elapsed.as_secs_f64(),
            )
            .latency(Latency::of(&m.latency))
            .note(note),
        );
    }
    work.clear(&dir);
    Ok(())
}
