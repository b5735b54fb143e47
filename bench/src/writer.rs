//! The session writer's rows: durable steps per second for a step of 4 calls through the writer
//! (the reply with its 4 dispatch ids, 4 attempts, 4 results, the commit: 10 synced appends), on
//! the file backend with 1 and 64 concurrent sessions, beside raw appends of the same events in
//! the same batches at the same tails, the raw fsync loop from as many threads and plain SQLite
//! `FULL`, all in turns;
//! and the same on the memory store, where no fsync hides the writer's own cost (folding, the
//! run's lock, the protocol checks).

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use stepjournal::recovery::MemoryRegistry;
use stepjournal::writer::{Clock, SequentialIds, SystemClock};
use stepjournal::{Journal, JournalOptions, Reply};
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{
    Attempt, AttemptStarted, Call, CallId, CallKind, CheckpointId, DispatchId, DispatchMinted,
    Entry, Event, Message, RawJson, Replay, ReplyCommitted, Role, RunId, RunStarted, Seq,
    SessionId, Stamped, StepCommit, StepNo, ToolResult,
};

use crate::appends::Measured;
use crate::args::WorkDir;
use crate::plain::{Sharing, Sync};
use crate::table::{Compare, Latency, Row, Section, Table};
use crate::turns::{Contender, in_turns};

/// Calls per step.
const CALLS: usize = 4;
/// Appends per step: the reply with its dispatch ids, one attempt and one result per call, the
/// commit.
pub(crate) const APPENDS_PER_STEP: u64 = 2 + 2 * CALLS as u64;

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    for (backend, sessions) in [(Backend::File, 1usize), (Backend::File, 64), (Backend::Memory, 1)]
    {
        let plural = if sessions == 1 { "" } else { "s" };
        let dir = work.sub(&format!("writer-{}-{sessions}", backend.tag()))?;
        let raw_key = format!("{}.writer", crate::raw::fsync_key(256, sessions));
        let sql_key = format!("{}.writer", crate::plain::full_key(256, sessions));
        let beside = "in turn with the session writer";
        let mut contenders = Vec::new();
        if backend == Backend::File {
            let raw = crate::raw::contender(&dir, 256, sessions)?;
            contenders.push(raw.renamed(
                raw_key.clone(),
                format!(
                    "write + fdatasync, 256-byte records, preallocated, 1 per sync, {sessions} \
                     thread{plural}, a file each, {beside}"
                ),
            ));
            let plain = crate::plain::contender(&dir, 256, sessions, Sync::Full, Sharing::Shared)?;
            contenders.push(plain.renamed(
                sql_key.clone(),
                format!("synchronous=FULL, 256 B events, {sessions} session{plural}, {beside}"),
            ));
        }
        contenders.push(contender(&dir, backend, sessions, Mode::Raw)?);
        contenders.push(contender(&dir, backend, sessions, Mode::Writer)?);
        let turned = in_turns(work, contenders)?;
        let raw_steps = turned
            .iter()
            .find(|t| t.key == key(backend, sessions, Mode::Raw))
            .map_or(0.0, |t| t.measured.appends_per_sec());
        for t in turned {
            let row = match t.group {
                "raw" => t
                    .row(Section::Raw, Measured::events_per_sec, "records/s")
                    .vs_sqlite(Compare::to(sql_key.clone())),
                "plain sqlite" => t
                    .row(Section::Writer, Measured::appends_per_sec, "appends/s")
                    .vs_raw(Compare::to(raw_key.clone()))
                    .vs_sqlite(Compare::to(sql_key.clone())),
                _ => {
                    let m = &t.measured;
                    let mut note = t.note;
                    if t.key == key(backend, sessions, Mode::Writer) && raw_steps > 0.0 {
                        note = format!(
                            "{:.2}x the raw appends' steps/s; {note}",
                            m.appends_per_sec() / raw_steps
                        );
                    }
                    let mut row = Row::new(
                        Section::Writer,
                        t.key,
                        t.group,
                        t.workload,
                        m.appends_per_sec(),
                        "steps/s",
                        m.elapsed.as_secs_f64(),
                    )
                    .latency(Latency::of(&m.latency))
                    .fsyncs(
                        t.syncs.map(|f| f as f64 / (m.appends * APPENDS_PER_STEP).max(1) as f64),
                    )
                    .note(note);
                    if backend == Backend::File {
                        let appends = APPENDS_PER_STEP as f64;
                        row = row
                            .vs_raw(Compare::rate_only(raw_key.clone(), appends))
                            .vs_sqlite(Compare::rate_only(sql_key.clone(), appends));
                    }
                    row
                }
            };
            table.push(row);
        }
        work.clear(&dir);
    }
    Ok(())
}

fn key(backend: Backend, sessions: usize, mode: Mode) -> String {
    format!("writer.{}.{}.{sessions}", mode.name().replace(' ', "-"), backend.tag())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// The file backend, `Synced`.
    File,
    /// The memory store: no I/O.
    Memory,
}

impl Backend {
    fn tag(self) -> &'static str {
        match self {
            Backend::File => "file",
            Backend::Memory => "memory",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Backend::File => "file, Synced",
            Backend::Memory => "memory store",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The same batches through `JournalStore::append`.
    Raw,
    /// Through the session writer.
    Writer,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Raw => "raw appends",
            Mode::Writer => "session writer",
        }
    }
}

pub(crate) fn calls() -> Vec<Call> {
    (0..CALLS)
        .map(|i| Call {
            call: CallId::from(format!("c{i}").as_str()),
            tool: "lookup".into(),
            args: RawJson::parse(r#"{"query":"restaurants near the station","limit":5}"#)
                .unwrap_or_default(),
            kind: CallKind::Tool,
            replay: Replay::Safe,
            group: None,
            sequential: false,
        })
        .collect()
}

pub(crate) fn output() -> RawJson {
    RawJson::parse(r#"{"results":["Chez Nous","La Table","Bistro 9"],"took_ms":41}"#)
        .unwrap_or_default()
}

/// The writer's workload (or the raw appends of its batches) on a journal of its own in `dir`.
pub(crate) fn contender(
    dir: &Path,
    backend: Backend,
    sessions: usize,
    mode: Mode,
) -> Result<Contender, String> {
    let (store, file): (Arc<dyn JournalStore>, Option<Arc<FileStore>>) = match backend {
        Backend::File => {
            let path = dir.join(mode.name().replace(' ', "-"));
            let file =
                Arc::new(FileStore::open(&path, FileOptions::new()).map_err(|e| e.to_string())?);
            (file.clone(), Some(file))
        }
        Backend::Memory => (Arc::new(MemoryStore::new()), None),
    };
    let registry = MemoryRegistry::new().with_tool("lookup", Replay::Safe);
    let options = JournalOptions::new().ids(Arc::new(SequentialIds::new()));
    let journal =
        Journal::new(store.clone(), Arc::new(registry), options).map_err(|e| e.to_string())?;
    let plural = if sessions == 1 { "" } else { "s" };
    let note = match mode {
        Mode::Raw => format!(
            "the writer's {APPENDS_PER_STEP} batches appended with JournalStore::append; latency \
             per step"
        ),
        Mode::Writer => format!("{APPENDS_PER_STEP} appends per step; latency per step"),
    };
    Ok(Contender::new(
        "writer",
        key(backend, sessions, mode),
        format!(
            "{}, step of {CALLS} calls, {}, {sessions} session{plural}",
            mode.name(),
            backend.name()
        ),
        &note,
        Box::new(move |round, budget| {
            let before = file.as_ref().map(|f| f.stats().syncs);
            let m = slice(&journal, &*store, round, sessions, mode, budget)?;
            let after = file.as_ref().map(|f| f.stats().syncs);
            Ok((m, after.zip(before).map(|(a, b)| a - b)))
        }),
    ))
}

/// One timed slice: each of `sessions` threads drives a session of its own, new this round.
/// Its `appends` count steps.
fn slice(
    journal: &Journal,
    store: &dyn JournalStore,
    round: usize,
    sessions: usize,
    mode: Mode,
    budget: Duration,
) -> Result<Measured, String> {
    let barrier = Barrier::new(sessions + 1);
    let (per_thread, elapsed) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..sessions)
            .map(|i| {
                let barrier = &barrier;
                scope.spawn(move || -> Result<(u64, Histogram<u64>, Driver<'_>), String> {
                    let session = SessionId::new(format!("writer-{round}-{i}").as_str()).unwrap();
                    let made = match mode {
                        Mode::Raw => Driver::raw(store, session),
                        Mode::Writer => Driver::writer(journal, session),
                    };
                    // Every thread reaches the barrier, even one that failed, so none waits forever.
                    barrier.wait();
                    let mut driver = made?;
                    let mut hist = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
                    let mut steps = 0u64;
                    let until = Instant::now() + budget;
                    while Instant::now() < until {
                        let t = Instant::now();
                        driver.step(steps)?;
                        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        hist.record(ns.max(1)).map_err(|e| e.to_string())?;
                        steps += 1;
                    }
                    // Handed back, so that dropping the run's folded state is not timed.
                    Ok((steps, hist, driver))
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        (results, start.elapsed())
    });
    let mut m = Measured::empty()?;
    for r in per_thread {
        let (n, h, _driver) = r.map_err(|_| "a session thread panicked".to_owned())??;
        m.appends += n;
        m.latency.add(&h).map_err(|e| e.to_string())?;
    }
    m.events = m.appends * APPENDS_PER_STEP;
    m.elapsed = elapsed;
    Ok(m)
}

/// Drives one session, a step at a time.
enum Driver<'a> {
    Raw { store: &'a dyn JournalStore, session: SessionId, tail: Seq, calls: Vec<Call> },
    Writer { run: stepjournal::Run, calls: Vec<Call> },
}

impl<'a> Driver<'a> {
    fn raw(store: &'a dyn JournalStore, session: SessionId) -> Result<Self, String> {
        let at = SystemClock.now();
        let begin = [
            Stamped::at(
                at,
                RunStarted {
                    run: RunId::from("bench-run"),
                    entry: Entry::NewTurn { message: "bench".into() },
                    by: None,
                },
            ),
            Stamped::at(at, Message { role: Role::User, text: "bench".into() }),
        ];
        let ack = store
            .append(&session, Seq(0), &begin, Durability::Synced)
            .map_err(|e| e.to_string())?;
        Ok(Driver::Raw { store, session, tail: ack.next, calls: calls() })
    }

    fn writer(journal: &Journal, session: SessionId) -> Result<Self, String> {
        let run = journal
            .begin_run(&session, Entry::NewTurn { message: "bench".into() })
            .map_err(|e| e.to_string())?;
        Ok(Driver::Writer { run, calls: calls() })
    }

    fn step(&mut self, n: u64) -> Result<(), String> {
        match self {
            Driver::Raw { store, session, tail, calls } => {
                let step = StepNo(n + 1);
                let mut append = |events: Vec<Event>| -> Result<(), String> {
                    let at = SystemClock.now();
                    let stamped: Vec<Stamped> =
                        events.into_iter().map(|e| Stamped::at(at, e)).collect();
                    let ack = store
                        .append(session, *tail, &stamped, Durability::Synced)
                        .map_err(|e| e.to_string())?;
                    *tail = ack.next;
                    Ok(())
                };
                let mut reply = vec![Event::ReplyCommitted(ReplyCommitted {
                    step,
                    checkpoint: CheckpointId::from(format!("cp-a{n}").as_str()),
                    text: "looking".into(),
                    calls: calls.clone(),
                    metadata: None,
                })];
                reply.extend(calls.iter().enumerate().map(|(i, c)| {
                    Event::DispatchMinted(DispatchMinted {
                        call: c.call.clone(),
                        dispatch: DispatchId::from(format!("d-{n}-{i}").as_str()),
                    })
                }));
                append(reply)?;
                for c in calls.iter() {
                    let call = c.call.clone();
                    append(vec![Event::AttemptStarted(AttemptStarted {
                        call: call.clone(),
                        attempt: Attempt(1),
                    })])?;
                    append(vec![Event::ToolResult(ToolResult {
                        call,
                        attempt: Attempt(1),
                        output: output(),
                        is_error: false,
                        metadata: None,
                    })])?;
                }
                append(vec![Event::StepCommit(StepCommit {
                    step,
                    checkpoint: CheckpointId::from(format!("cp-c{n}").as_str()),
                })])
            }
            Driver::Writer { run, calls } => {
                let reply = Reply { text: "looking".into(), calls: calls.clone(), metadata: None };
                let step = run.commit_reply(reply).map_err(|e| e.to_string())?;
                for c in calls.iter() {
                    let body = step.start_body(&c.call).map_err(|e| e.to_string())?;
                    body.finish(output(), false).map_err(|e| e.to_string())?;
                }
                step.commit().map(|_| ()).map_err(|e| e.to_string())
            }
        }
    }
}
