//! The fold on one core, its state dropped inside the figure: a long protocol-shaped session
//! (tool steps of 3 calls, each with its attempt, output and result; a new run every 50 steps)
//! folded by `recovery::fold_owned` from owned events (what a reader decodes), then the state
//! freed. The copy of the log each pass consumes is made untimed.

use std::time::{Duration, Instant};

use stepjournal::recovery::fold_owned;
use stepjournal_codec::{
    Attempt, AttemptStarted, CallId, CheckpointId, DispatchId, DispatchMinted, Entry, Event,
    Message, OutputChunk, RawJson, ReplyCommitted, Role, RunEnded, RunId, RunOutcome, RunStarted,
    StepCommit, StepNo, ToolResult,
};

use crate::args::WorkDir;
use crate::recovery::call;
use crate::table::{Row, Section, Table, fmt_us};

/// Calls per step.
const CALLS: usize = 3;
/// Steps per run.
const STEPS_PER_RUN: u64 = 50;

/// A session of at least `events` events, every step closed.
pub fn long_log(events: usize) -> Vec<Event> {
    let mut log = Vec::with_capacity(events + 64);
    let mut step = 0u64;
    let mut run = 0u64;
    while log.len() < events {
        if step.is_multiple_of(STEPS_PER_RUN) {
            if run > 0 {
                log.push(Event::RunEnded(RunEnded {
                    run: RunId::new(format!("run-{run}")),
                    outcome: RunOutcome::Completed,
                    error: None,
                    by: None,
                }));
            }
            run += 1;
            let text = format!("question {run}");
            log.push(Event::RunStarted(RunStarted {
                run: RunId::new(format!("run-{run}")),
                entry: Entry::NewTurn { message: text.clone() },
                by: None,
            }));
            log.push(Event::Message(Message { role: Role::User, text }));
        }
        step += 1;
        let calls: Vec<_> = (0..CALLS).map(|j| call(step, j)).collect();
        let ids: Vec<CallId> = calls.iter().map(|c| c.call.clone()).collect();
        log.push(Event::ReplyCommitted(ReplyCommitted {
            step: StepNo(step),
            checkpoint: CheckpointId::new(format!("cp-{step}-reply")),
            text: "Let me look that up.".to_owned(),
            calls,
            metadata: None,
        }));
        log.extend(ids.iter().map(|id| {
            Event::DispatchMinted(DispatchMinted {
                call: id.clone(),
                dispatch: DispatchId::new(format!("d-{id}")),
            })
        }));
        for id in &ids {
            log.push(Event::AttemptStarted(AttemptStarted {
                call: id.clone(),
                attempt: Attempt(1),
            }));
            log.push(Event::OutputChunk(OutputChunk {
                call: id.clone(),
                attempt: Attempt(1),
                text: "reading the file...".to_owned(),
            }));
            log.push(Event::ToolResult(ToolResult {
                call: id.clone(),
                attempt: Attempt(1),
                output: RawJson::parse(r#"{"ok":true,"bytes":512}"#).unwrap_or_default(),
                is_error: false,
                metadata: None,
            }));
        }
        log.push(Event::StepCommit(StepCommit {
            step: StepNo(step),
            checkpoint: CheckpointId::new(format!("cp-{step}-commit")),
        }));
    }
    log
}

/// One pass: the fold's time and the drop's.
fn pass(log: &[Event]) -> (Duration, Duration) {
    let owned = log.to_vec();
    let t = Instant::now();
    let state = fold_owned(owned);
    let folded = t.elapsed();
    drop(std::hint::black_box(state));
    (folded, t.elapsed() - folded)
}

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let (events, passes) = work.fold_events();
    let log = long_log(events);
    let n = log.len();
    let mut runs: Vec<(Duration, Duration)> = (0..passes.max(1)).map(|_| pass(&log)).collect();
    runs.sort_by_key(|(f, d)| *f + *d);
    let (fold, dropped) = runs.get(runs.len() / 2).copied().unwrap_or_default();
    let total = (fold + dropped).as_secs_f64().max(f64::MIN_POSITIVE);
    let per_sec = |d: Duration| n as f64 / d.as_secs_f64().max(f64::MIN_POSITIVE);
    table.push(
        Row::new(
            Section::Recovery,
            "recovery.fold",
            "recovery",
            format!("fold_owned + drop of the state, {n} events of one session, 1 thread"),
            n as f64 / total,
            "events/s",
            total,
        )
        .note(format!(
            "the fold alone {:.2}M events/s ({}), dropping the state {} ({:.2}x the fold); the \
             median of {} passes by their sum",
            per_sec(fold) / 1e6,
            fmt_us(fold.as_secs_f64() * 1e6),
            fmt_us(dropped.as_secs_f64() * 1e6),
            dropped.as_secs_f64() / fold.as_secs_f64().max(f64::MIN_POSITIVE),
            runs.len()
        )),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_long_log_follows_the_protocol() {
        let log = long_log(2_000);
        assert!(log.len() >= 2_000);
        let findings = stepjournal::recovery::verify(&log);
        assert!(findings.is_empty(), "{findings:?}");
    }
}
