//! Folding a 1-million-event protocol-shaped log, and planning a wake over it, on one core.
//!
//! The log is a long session of tool steps (reply, dispatch ids, bodies with output, results,
//! step commits, a new run every 50 steps) ending in an open step cut off mid-body, so the plan
//! has calls to decide.

use std::hint::black_box;
use std::time::Duration;

use criterion::BatchSize;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use stepjournal_codec::{
    Attempt, AttemptStarted, Call, CallId, CallKind, CheckpointId, DispatchId, DispatchMinted,
    Entry, Event, Message, OutputChunk, RawJson, Replay, ReplyCommitted, Role, RunEnded, RunId,
    RunOutcome, RunStarted, StepCommit, StepNo, ToolName, ToolResult,
};
use stepjournal_recovery::{Config, MemoryRegistry, NewRun, fold, fold_owned, plan};

const EVENTS: usize = 1_000_000;
const CALLS_PER_STEP: usize = 3;

fn call(step: u64, j: usize) -> Call {
    Call {
        call: CallId::new(format!("call-{step}-{j}")),
        tool: ToolName::new(if j.is_multiple_of(2) { "read" } else { "write" }),
        args: RawJson::parse(r#"{"path":"/srv/app/config.toml","line":42}"#).unwrap(),
        kind: CallKind::Tool,
        replay: if j.is_multiple_of(2) { Replay::Safe } else { Replay::Unsafe },
        group: (j == 2).then(|| "io".to_owned()),
        sequential: false,
    }
}

fn log() -> Vec<Event> {
    let mut events = Vec::with_capacity(EVENTS + 64);
    let mut step = 0u64;
    let mut run = 0u64;
    while events.len() < EVENTS - 32 {
        if step.is_multiple_of(50) {
            if run > 0 {
                events.push(Event::RunEnded(RunEnded {
                    run: RunId::new(format!("run-{run}")),
                    outcome: RunOutcome::Completed,
                    error: None,
                    by: None,
                }));
            }
            run += 1;
            let text = format!("question {run}");
            events.push(Event::RunStarted(RunStarted {
                run: RunId::new(format!("run-{run}")),
                entry: Entry::NewTurn { message: text.clone() },
                by: None,
            }));
            events.push(Event::Message(Message { role: Role::User, text }));
        }
        step += 1;
        let open = events.len() >= EVENTS - 64;
        let calls: Vec<Call> = (0..CALLS_PER_STEP).map(|j| call(step, j)).collect();
        let ids: Vec<CallId> = calls.iter().map(|c| c.call.clone()).collect();
        events.push(Event::ReplyCommitted(ReplyCommitted {
            step: StepNo(step),
            checkpoint: CheckpointId::new(format!("cp-{step}-append")),
            text: "Let me look.".to_owned(),
            calls,
            metadata: None,
        }));
        for id in &ids {
            events.push(Event::DispatchMinted(DispatchMinted {
                call: id.clone(),
                dispatch: DispatchId::new(format!("d-{id}")),
            }));
        }
        for id in &ids {
            events.push(Event::AttemptStarted(AttemptStarted {
                call: id.clone(),
                attempt: Attempt(1),
            }));
            events.push(Event::OutputChunk(OutputChunk {
                call: id.clone(),
                attempt: Attempt(1),
                text: "reading the file...".to_owned(),
            }));
            if !open {
                events.push(Event::ToolResult(ToolResult {
                    call: id.clone(),
                    attempt: Attempt(1),
                    output: RawJson::parse(r#"{"ok":true,"bytes":512}"#).unwrap(),
                    is_error: false,
                    metadata: None,
                }));
            }
        }
        if open {
            break;
        }
        events.push(Event::StepCommit(StepCommit {
            step: StepNo(step),
            checkpoint: CheckpointId::new(format!("cp-{step}-commit")),
        }));
    }
    events
}

fn bench(c: &mut Criterion) {
    let events = log();
    let registry =
        MemoryRegistry::new().with_tool("read", Replay::Safe).with_tool("write", Replay::Unsafe);
    let new_run = NewRun {
        run: RunId::new("run-wake"),
        entry: Entry::Wake,
        commit_checkpoint: CheckpointId::new("cp-wake-commit"),
    };
    let config = Config::default();

    let mut group = c.benchmark_group("recovery");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(events.len() as u64));
    // Borrowed events: every text the state keeps is copied. The state is dropped inside the
    // measurement.
    group.bench_function("fold_1m_events", |b| b.iter(|| fold(black_box(&events))));
    // Owned events (what a reader decodes): texts are moved in. The copy of the log each
    // iteration consumes is made, and the state dropped, outside the measurement.
    group.bench_function("fold_owned_1m_events", |b| {
        b.iter_batched(
            || events.clone(),
            |owned| fold_owned(black_box(owned)),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("fold_owned_and_plan_1m_events", |b| {
        b.iter_batched(
            || events.clone(),
            |owned| {
                let state = fold_owned(black_box(owned));
                let plan = plan(&state, &new_run, &registry, &config);
                (state, plan)
            },
            BatchSize::PerIteration,
        )
    });
    let state = fold(&events);
    group.throughput(Throughput::Elements(1));
    group.bench_function("plan_over_folded_1m_events", |b| {
        b.iter(|| plan(black_box(&state), &new_run, &registry, &config))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
