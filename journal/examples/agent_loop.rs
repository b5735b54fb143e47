//! A small scripted agent loop over the file backend, then a crash and its recovery.
//!
//! Turn 1 runs a step of three calls to the end. Turn 2 commits a reply with an unsafe call
//! (`charge_card`) and a safe one (`set_preference`), starts both bodies, and is lost: the run,
//! its bodies and the store are dropped without ending anything, as a crashed process would
//! leave them. The store is opened again and a `wake` recovers the step: the safe call runs
//! again as attempt 2 under the same dispatch id, the unsafe one is answered "outcome unknown".
//!
//! Run it with `cargo run -p stepjournal --example agent_loop`.

use std::error::Error;
use std::sync::Arc;

use serde_json::json;
use stepjournal::recovery::{Action, TranscriptItem};
use stepjournal::registry::SchemaRegistry;
use stepjournal::{Journal, JournalOptions, Reply, Step};
use stepjournal_backends::JournalStore;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_codec::{Call, CallId, CallKind, Entry, RawJson, Replay, RunOutcome, SessionId};

/// The tools as they are now: policies and input schemas.
fn registry() -> Result<SchemaRegistry, Box<dyn Error>> {
    let object = json!({ "type": "object" });
    Ok(SchemaRegistry::from_tools_json(&json!({
        "search_restaurants": { "replay": "safe", "input_schema": object },
        "set_preference": {
            "replay": "safe",
            "input_schema": {
                "type": "object",
                "required": ["key", "value"],
                "properties": { "key": { "type": "string" }, "value": { "type": "string" } }
            }
        },
        "send_email": { "replay": "unsafe", "input_schema": object },
        "charge_card": { "replay": "unsafe", "input_schema": object },
    }))?)
}

/// A call as the model made it; `replay` is the tool's policy when it was called.
fn call(
    id: &str,
    tool: &str,
    args: serde_json::Value,
    replay: Replay,
) -> Result<Call, Box<dyn Error>> {
    Ok(Call {
        call: CallId::from(id),
        tool: tool.into(),
        args: RawJson::from_value(&args)?,
        kind: CallKind::Tool,
        replay,
        group: None,
        sequential: false,
    })
}

/// Runs one call's body to its result, the way a runtime hands a tool its dedupe key.
fn run_body(step: &Step, call: &CallId, output: serde_json::Value) -> Result<(), Box<dyn Error>> {
    let body = step.start_body(call)?;
    println!(
        "  body of {call}: attempt {}, dispatch {}, idempotency key {}",
        body.attempt(),
        body.dispatch(),
        body.idempotency_key()
    );
    body.output_chunk(format!("working on {call}"))?;
    body.finish(RawJson::from_value(&output)?, false)?;
    Ok(())
}

fn open(dir: &std::path::Path) -> Result<Journal, Box<dyn Error>> {
    let store: Arc<dyn JournalStore> = Arc::new(FileStore::open(dir, FileOptions::default())?);
    Ok(Journal::new(store, Arc::new(registry()?), JournalOptions::new())?)
}

/// Turn 1: a user message, a reply with three calls, their bodies, the commit, the end.
fn turn_one(journal: &Journal, session: &SessionId) -> Result<(), Box<dyn Error>> {
    println!("turn 1: a whole step");
    let run = journal
        .begin_run(session, Entry::NewTurn { message: "Find a table for two tonight".into() })?;
    let step = run.commit_reply(
        Reply::new("Looking.")
            .call(call("c1", "search_restaurants", json!({ "near": "home" }), Replay::Safe)?)
            .call(call(
                "c2",
                "set_preference",
                json!({ "key": "party", "value": "2" }),
                Replay::Safe,
            )?)
            .call(call("c3", "send_email", json!({ "to": "me" }), Replay::Unsafe)?),
    )?;
    run_body(&step, &CallId::from("c1"), json!({ "found": ["Chez Nous"] }))?;
    run_body(&step, &CallId::from("c2"), json!({ "ok": true }))?;
    run_body(&step, &CallId::from("c3"), json!({ "sent": true }))?;
    step.commit()?;
    run.commit_reply(Reply::new("Chez Nous has a table at eight."))?.commit()?;
    run.end(RunOutcome::Completed)?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let session = SessionId::new("dinner-plans")?;

    let journal = open(dir.path())?;
    turn_one(&journal, &session)?;

    println!("turn 2: two bodies running when the process is lost");
    let run = journal
        .begin_run(&session, Entry::NewTurn { message: "Book it and pay the deposit".into() })?;
    let step = run.commit_reply(
        Reply::new("Booking.")
            .call(call("c1", "charge_card", json!({ "cents": 2000 }), Replay::Unsafe)?)
            .call(call(
                "c2",
                "set_preference",
                json!({ "key": "table", "value": "8pm" }),
                Replay::Safe,
            )?),
    )?;
    let charge = step.start_body(&CallId::from("c1"))?;
    charge.output_chunk("contacting the payment provider")?;
    let preference = step.start_body(&CallId::from("c2"))?;
    println!(
        "  running: c1 (dispatch {}) and c2 (dispatch {})",
        charge.dispatch(),
        preference.dispatch()
    );
    // The crash: nothing is finished, committed or ended; the store is closed.
    drop((charge, preference, step, run, journal));

    println!("recovery: the store reopened, a wake");
    let journal = open(dir.path())?;
    let run = journal.begin_run(&session, Entry::Wake)?;
    for decision in &run.plan().calls {
        println!(
            "  {}: {} (rule {}: {})",
            decision.call,
            decision.action.name(),
            decision.rule.id,
            decision.rule.why
        );
    }
    if let Some(step) = run.step() {
        for decision in &run.plan().calls {
            match &decision.action {
                Action::Run { .. } => run_body(&step, &decision.call, json!({ "ok": true }))?,
                Action::Pair { reason } => {
                    println!("  {} is answered `{}`", decision.call, reason.as_str())
                }
                other => println!("  {} is left to the runtime: {}", decision.call, other.name()),
            }
        }
        step.commit()?;
    }
    run.commit_reply(Reply::new(
        "Your table is saved; please check whether the deposit went through.",
    ))?
    .commit()?;
    run.end(RunOutcome::Completed)?;

    println!("what the model is shown for turn 2:");
    let shown = run.transcript()?;
    let turn_two =
        shown.iter().rposition(|t| matches!(t, TranscriptItem::Message { .. })).unwrap_or(0);
    for item in shown.iter().skip(turn_two) {
        match item {
            TranscriptItem::Message { text, .. } => println!("  user: {text}"),
            TranscriptItem::Reply { text, calls, .. } => {
                println!("  model: {text} ({} calls)", calls.len())
            }
            TranscriptItem::ToolResult { call, output, .. } => {
                println!("  result of {call}: {output}")
            }
            TranscriptItem::Paired { call, reason, message, partial, .. } => println!(
                "  {call} paired {}: {message} (partial output: {partial:?})",
                reason.as_str()
            ),
            other => println!("  {other:?}"),
        }
    }
    Ok(())
}
