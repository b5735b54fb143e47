//! The session writer's rows: durable steps per second for a step of 4 calls through the writer
//! (the reply with its 4 dispatch ids, 4 attempts, 4 results, the commit: 10 synced appends), on
//! the file backend with 1 and 64 concurrent sessions, beside raw appends of the same events in
//! the same batches at the same tails; and the same on the memory store, where no fsync hides
//! the writer's own cost (folding, the run's lock, the protocol checks).

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use stepjournal::recovery::MemoryRegistry;
use stepjournal::writer::SequentialIds;
use stepjournal::{Journal, JournalOptions, Reply};
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{
    Attempt, AttemptStarted, Call, CallId, CallKind, CheckpointId, DispatchId, DispatchMinted,
    Entry, Event, Message, RawJson, Replay, ReplyCommitted, Role, RunId, RunStarted, Seq,
    SessionId, Stamped, StepCommit, StepNo, ToolResult,
};

use crate::args::WorkDir;
use crate::table::{Compare, Latency, Row, Section, Table};

/// Calls per step.
const CALLS: usize = 4;
/// Appends per step: the reply with its dispatch ids, one attempt and one result per call, the
/// commit.
const APPENDS_PER_STEP: u64 = 2 + 2 * CALLS as u64;

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    for (backend, sessions) in [(Backend::File, 1usize), (Backend::File, 64), (Backend::Memory, 1)]
    {
        let raw = run(work, sessions, Mode::Raw, backend)?;
        let writer = run(work, sessions, Mode::Writer, backend)?;
        let plural = if sessions == 1 { "" } else { "s" };
        for (m, mode) in [(&raw, Mode::Raw), (&writer, Mode::Writer)] {
            let note = match mode {
                Mode::Raw => format!(
                    "the writer's {APPENDS_PER_STEP} batches appended with JournalStore::append; \
                     latency per step"
                ),
                Mode::Writer => format!(
                    "{APPENDS_PER_STEP} appends per step; {:.2}x the raw appends' steps/s; \
                     latency per step",
                    m.steps_per_sec() / raw.steps_per_sec().max(f64::MIN_POSITIVE)
                ),
            };
            let key = format!(
                "writer.{}.{}.{sessions}",
                mode.name().replace(' ', "-"),
                backend.name().replace([' ', ','], "")
            );
            let mut row = Row::new(
                Section::Writer,
                key,
                "writer",
                format!(
                    "{}, step of {CALLS} calls, {}, {sessions} session{plural}",
                    mode.name(),
                    backend.name()
                ),
                m.steps_per_sec(),
                "steps/s",
                m.elapsed.as_secs_f64(),
            )
            .latency(Latency::of(&m.latency))
            .fsyncs(m.fsyncs.map(|f| f as f64 / (m.steps * APPENDS_PER_STEP).max(1) as f64))
            .note(note);
            if backend == Backend::File {
                let appends = APPENDS_PER_STEP as f64;
                row = row
                    .vs_raw(Compare::rate_only(crate::raw::fsync_key(256), appends))
                    .vs_sqlite(Compare::rate_only(crate::plain::full_key(256, sessions), appends));
            }
            table.push(row);
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    /// The file backend, `Synced`.
    File,
    /// The memory store: no I/O.
    Memory,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::File => "file, Synced",
            Backend::Memory => "memory store",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
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

/// What one run measured.
struct Steps {
    steps: u64,
    elapsed: Duration,
    /// Latency per step, nanoseconds.
    latency: Histogram<u64>,
    /// `fdatasync` calls made (the file backend only).
    fsyncs: Option<u64>,
}

impl Steps {
    fn steps_per_sec(&self) -> f64 {
        self.steps as f64 / self.elapsed.as_secs_f64()
    }
}

fn calls() -> Vec<Call> {
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

fn output() -> RawJson {
    RawJson::parse(r#"{"results":["Chez Nous","La Table","Bistro 9"],"took_ms":41}"#)
        .unwrap_or_default()
}

/// One timed run on a fresh journal: each of `sessions` threads drives its own session.
fn run(work: &WorkDir, sessions: usize, mode: Mode, backend: Backend) -> Result<Steps, String> {
    let mut dir = None;
    let (store, file): (Arc<dyn JournalStore>, Option<Arc<FileStore>>) = match backend {
        Backend::File => {
            let d = work.sub(&format!("writer-{}-{sessions}", mode.name().replace(' ', "-")))?;
            let file =
                Arc::new(FileStore::open(&d, FileOptions::new()).map_err(|e| e.to_string())?);
            dir = Some(d);
            (file.clone(), Some(file))
        }
        Backend::Memory => (Arc::new(MemoryStore::new()), None),
    };
    let registry = MemoryRegistry::new().with_tool("lookup", Replay::Safe);
    let options = JournalOptions::new().ids(Arc::new(SequentialIds::new()));
    let journal = Journal::new(store.clone(), Arc::new(registry), options);
    let budget = work.budget();
    let barrier = Barrier::new(sessions + 1);
    let syncs = || file.as_ref().map(|f| f.stats().syncs);
    let before = syncs();
    let (per_thread, elapsed) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..sessions)
            .map(|i| {
                let (barrier, journal, store) = (&barrier, &journal, &*store);
                scope.spawn(move || -> Result<(u64, Histogram<u64>, Driver<'_>), String> {
                    let session = SessionId::from(format!("writer-{i}").as_str());
                    let mut driver = match mode {
                        Mode::Raw => Driver::raw(store, session)?,
                        Mode::Writer => Driver::writer(journal, session)?,
                    };
                    let mut hist = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
                    let mut steps = 0u64;
                    barrier.wait();
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
    let mut latency = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    let mut steps = 0;
    for r in per_thread {
        let (n, h, _driver) = r.map_err(|_| "a session thread panicked".to_owned())??;
        steps += n;
        latency.add(&h).map_err(|e| e.to_string())?;
    }
    let fsyncs = syncs().zip(before).map(|(after, before)| after - before);
    drop((journal, store, file));
    if let Some(d) = dir {
        work.clear(&d);
    }
    Ok(Steps { steps, elapsed, latency, fsyncs })
}

/// Drives one session, a step at a time.
enum Driver<'a> {
    Raw { store: &'a dyn JournalStore, session: SessionId, tail: Seq, calls: Vec<Call> },
    Writer { run: stepjournal::Run, calls: Vec<Call> },
}

impl<'a> Driver<'a> {
    fn raw(store: &'a dyn JournalStore, session: SessionId) -> Result<Self, String> {
        let begin = [
            Stamped::now(RunStarted {
                run: RunId::from("bench-run"),
                entry: Entry::NewTurn { message: "bench".into() },
            }),
            Stamped::now(Message { role: Role::User, text: "bench".into() }),
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
                    let stamped: Vec<Stamped> = events.into_iter().map(Stamped::now).collect();
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
                    })])?;
                }
                append(vec![Event::StepCommit(StepCommit {
                    step,
                    checkpoint: CheckpointId::from(format!("cp-c{n}").as_str()),
                })])
            }
            Driver::Writer { run, calls } => {
                let reply = Reply { text: "looking".into(), calls: calls.clone() };
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
