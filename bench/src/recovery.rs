//! Recovering many sessions after a crash: open a file journal of `N` sessions, each a protocol
//! log of a few tool steps ending in a step cut off mid-body, and have every session's plan:
//! read its events, fold them (`recovery::fold_owned`) and plan a wake (`recovery::plan`, with
//! a `MemoryRegistry`). Timed from the open to the last plan, cold and warm, on every core and
//! on one; beside a sequential read of the same files.

use std::path::Path;
use std::time::Instant;

use hdrhistogram::Histogram;
use stepjournal::recovery::{Config, MemoryRegistry, NewRun, Plan, fold_owned, plan};
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{
    Attempt, AttemptStarted, Call, CallId, CallKind, CheckpointId, DispatchId, DispatchMinted,
    Entry, Event, Message, OutputChunk, RawJson, Replay, ReplyCommitted, Role, RunId, RunStarted,
    Seq, SessionId, Stamped, StepCommit, StepNo, ToolName, ToolResult,
};

use crate::args::WorkDir;
use crate::table::{Compare, Latency, Row, Section, Table};

/// Closed steps per session before the open one.
const STEPS: u64 = 3;
/// Calls per step.
const CALLS: usize = 2;

pub fn call(step: u64, j: usize) -> Call {
    let safe = j.is_multiple_of(2);
    Call {
        call: CallId::new(format!("call-{step}-{j}")),
        tool: ToolName::new(if safe { "read" } else { "write" }),
        args: RawJson::parse(r#"{"path":"/srv/app/config.toml","line":42}"#).unwrap_or_default(),
        kind: CallKind::Tool,
        replay: if safe { Replay::Safe } else { Replay::Unsafe },
        group: None,
        sequential: false,
    }
}

/// One session's log, one batch per append as a session writer makes them: the run and the
/// user's message; per step the reply with its dispatch ids, each call's attempt, output and
/// result, the commit; then an open step whose first call is cut off mid-body and whose second
/// never started.
pub fn session_log(n: usize) -> Vec<Vec<Event>> {
    let mut appends = vec![vec![
        Event::RunStarted(RunStarted {
            run: RunId::new(format!("run-{n}")),
            entry: Entry::NewTurn { message: "find me a table for four tonight".to_owned() },
            by: None,
        }),
        Event::Message(Message {
            role: Role::User,
            text: "find me a table for four tonight".to_owned(),
        }),
    ]];
    for step in 1..=STEPS + 1 {
        let open = step > STEPS;
        let calls: Vec<Call> = (0..CALLS).map(|j| call(step, j)).collect();
        let mut reply = vec![Event::ReplyCommitted(ReplyCommitted {
            step: StepNo(step),
            checkpoint: CheckpointId::new(format!("cp-{step}-reply")),
            text: "Let me look that up.".to_owned(),
            calls: calls.clone(),
            metadata: None,
        })];
        reply.extend(calls.iter().map(|c| {
            Event::DispatchMinted(DispatchMinted {
                call: c.call.clone(),
                dispatch: DispatchId::new(format!("d-{n}-{}", c.call)),
            })
        }));
        appends.push(reply);
        for (j, c) in calls.iter().enumerate() {
            if open && j > 0 {
                break;
            }
            appends.push(vec![Event::AttemptStarted(AttemptStarted {
                call: c.call.clone(),
                attempt: Attempt(1),
            })]);
            appends.push(vec![Event::OutputChunk(OutputChunk {
                call: c.call.clone(),
                attempt: Attempt(1),
                text: "reading the file...".to_owned(),
            })]);
            if !open {
                appends.push(vec![Event::ToolResult(ToolResult {
                    call: c.call.clone(),
                    attempt: Attempt(1),
                    output: RawJson::parse(r#"{"ok":true,"bytes":512}"#).unwrap_or_default(),
                    is_error: false,
                    metadata: None,
                })]);
            }
        }
        if !open {
            appends.push(vec![Event::StepCommit(StepCommit {
                step: StepNo(step),
                checkpoint: CheckpointId::new(format!("cp-{step}-commit")),
            })]);
        }
    }
    appends
}

pub fn registry() -> MemoryRegistry {
    MemoryRegistry::new().with_tool("read", Replay::Safe).with_tool("write", Replay::Unsafe)
}

pub fn wake() -> NewRun {
    NewRun {
        run: RunId::new("run-wake"),
        entry: Entry::Wake,
        commit_checkpoint: CheckpointId::new("cp-wake-commit"),
    }
}

/// Checks a plan is the one the log calls for: no refusal, every call of the open step decided.
pub fn check(session: &SessionId, plan: &Plan) -> Result<(), String> {
    if let Some(e) = &plan.error {
        return Err(format!("recovery of {session} was refused: {e}"));
    }
    if plan.calls.len() != CALLS {
        return Err(format!(
            "recovery of {session} decided {} calls, not the open step's {CALLS}",
            plan.calls.len()
        ));
    }
    Ok(())
}

fn session_id(n: usize) -> SessionId {
    SessionId::new(format!("sess-{n:06}").as_str()).unwrap()
}

/// Writes `sessions` sessions' logs (buffered: the journal as a crash left it), 4 writers.
fn build(dir: &Path, sessions: usize) -> Result<u64, String> {
    let store = FileStore::open(dir, FileOptions::new()).map_err(|e| format!("file: {e}"))?;
    const WRITERS: usize = 4;
    let events = std::thread::scope(|scope| -> Result<u64, String> {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let store = &store;
                scope.spawn(move || -> Result<u64, String> {
                    let mut events = 0u64;
                    for n in (w..sessions).step_by(WRITERS) {
                        let s = session_id(n);
                        let mut tail = Seq(0);
                        for batch in session_log(n) {
                            let stamped: Vec<Stamped> = batch
                                .into_iter()
                                .map(|e| {
                                    Stamped::at(stepjournal_codec::UnixMillis(1_700_000_000_000), e)
                                })
                                .collect();
                            events += stamped.len() as u64;
                            tail = store
                                .append(&s, tail, &stamped, Durability::Buffered)
                                .map_err(|e| format!("building the journal: {e}"))?
                                .next;
                        }
                    }
                    Ok(events)
                })
            })
            .collect();
        let mut total = 0;
        for h in handles {
            total += h.join().map_err(|_| "a writer panicked".to_owned())??;
        }
        Ok(total)
    })?;
    Ok(events)
}

/// What one recovery measured.
struct Recovered {
    sessions: usize,
    secs: f64,
    open_secs: f64,
    /// Per session: read + fold + plan, their state and plan dropped, nanoseconds.
    latency: Histogram<u64>,
}

/// Opens the journal and plans every session's wake on `threads` threads.
fn recover(dir: &Path, threads: usize) -> Result<Recovered, String> {
    let registry = registry();
    let new_run = wake();
    let config = Config::default();
    let start = Instant::now();
    let store = FileStore::open(dir, FileOptions::new()).map_err(|e| format!("file: {e}"))?;
    let open_secs = start.elapsed().as_secs_f64();
    let sessions = store.sessions().map_err(|e| format!("listing sessions: {e}"))?;
    let chunk = sessions.len().div_ceil(threads.max(1)).max(1);
    let hists = std::thread::scope(|scope| {
        let handles: Vec<_> = sessions
            .chunks(chunk)
            .map(|part| {
                let (store, registry, new_run, config) = (&store, &registry, &new_run, &config);
                scope.spawn(move || -> Result<Histogram<u64>, String> {
                    let mut hist = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
                    for s in part {
                        let t = Instant::now();
                        let records = store.read_all(s).map_err(|e| format!("reading {s}: {e}"))?;
                        let state = fold_owned(records.into_iter().map(|r| r.event).collect());
                        let p = plan(&state, new_run, registry, config);
                        let checked = check(s, &p);
                        // Freeing the state and the plan is part of the figure.
                        drop((state, p));
                        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        checked?;
                        hist.record(ns.max(1)).map_err(|e| e.to_string())?;
                    }
                    Ok(hist)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    });
    let secs = start.elapsed().as_secs_f64();
    let mut latency = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for h in hists {
        latency
            .add(h.map_err(|_| "a recovery thread panicked".to_owned())??)
            .map_err(|e| e.to_string())?;
    }
    Ok(Recovered { sessions: sessions.len(), secs, open_secs, latency })
}

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("recovery")?;
    let n = work.recovery_sessions();
    let events = build(&dir, n)?;
    // Opened once untimed, so that the timed opens find the preallocated zeros already cut and
    // every sealed segment's sidecar index written (the reclaim thread writes one after each
    // seal).
    {
        let store = FileStore::open(&dir, FileOptions::new()).map_err(|e| format!("file: {e}"))?;
        store.wait_reclaimed();
    }
    let files = crate::file::segment_files(&dir)?;
    let evicted: Vec<_> = files.iter().cloned().chain(crate::file::sidecar_files(&dir)?).collect();
    let bytes: u64 = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cold_ok = crate::cache::available(&dir);
    let scaled = if work.quick {
        format!("; --quick: {n} sessions, not the full run's {}", crate::args::RECOVERY_SESSIONS)
    } else {
        String::new()
    };
    for (cold, threads) in [(true, cores), (false, cores), (false, 1)] {
        if cold && !cold_ok {
            continue;
        }
        let cache = if cold { "cold" } else { "warm" };
        let read_key = format!("raw.read.recovery.{cache}");
        if table.find(&read_key).is_none() {
            let what = format!("the recovery rows' segments ({n} sessions)");
            table.push(crate::raw::read_row(&read_key, &files, &what, cold)?);
        }
        if cold {
            crate::cache::evict(&evicted)?;
        }
        let r = recover(&dir, threads)?;
        if r.sessions != n {
            return Err(format!("recovery found {} sessions, not the {n} written", r.sessions));
        }
        let plural = if threads == 1 { "" } else { "s" };
        if !cold && threads == 1 {
            let after_open = (r.secs - r.open_secs).max(f64::MIN_POSITIVE);
            table.push(
                Row::new(
                    Section::Recovery,
                    "file.recovery.events",
                    "file",
                    format!(
                        "recovery events/s: read + decode + fold + plan of {n} sessions after \
                         the open, warm cache, 1 thread"
                    ),
                    events as f64 / after_open,
                    "events/s",
                    after_open,
                )
                .mb(bytes as f64 / 1e6 / after_open)
                .vs("fold + drop alone", Compare::rate_only("recovery.fold", 1.0))
                .note(format!(
                    "{events} events in {}, every session's state and plan dropped inside the \
                     figure{scaled}",
                    crate::table::fmt_us(after_open * 1e6)
                )),
            );
        }
        table.push(
            Row::new(
                Section::Recovery,
                format!("file.recovery.{cache}.{threads}"),
                "file",
                format!(
                    "recovery of {n} sessions (open + read + fold + plan), {cache} cache, \
                     {threads} thread{plural}"
                ),
                r.sessions as f64 / r.secs,
                "sessions/s",
                r.secs,
            )
            .mb(bytes as f64 / 1e6 / r.secs)
            .latency(Latency::of(&r.latency))
            .vs_raw(Compare::bytes(read_key))
            .note(format!(
                "every plan in {} (open {}); {events} events, {:.1} MB; latency per session \
                 (read + fold + plan); {}{scaled}",
                crate::table::fmt_us(r.secs * 1e6),
                crate::table::fmt_us(r.open_secs * 1e6),
                bytes as f64 / 1e6,
                crate::cache::describe(cold)
            )),
        );
    }
    work.clear(&dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_log_follows_the_protocol_and_plans_both_open_calls() {
        let events: Vec<Event> = session_log(7).into_iter().flatten().collect();
        let findings = stepjournal::recovery::verify(&events);
        assert!(findings.is_empty(), "{findings:?}");
        let p = plan(&fold_owned(events), &wake(), &registry(), &Config::default());
        assert_eq!(check(&session_id(7), &p), Ok(()));
    }
}
