//! A tokio agent loop on `Tools` and `drive`: many sessions at once on a 2-worker runtime over
//! the file backend, a crash in the middle of their steps, and `recover_all` at the next start.
//!
//! Each session's scripted model asks for a search (safe) and an email (unsafe, its effect
//! keyed on the call's idempotency key), then answers. The first process runs half the
//! sessions to the end and dies with the others in the middle of their first step (the
//! emails of some sent, not recorded). The second process opens the store, lists the sessions
//! to recover, and `recover_all` wakes them: each search runs again under the same dispatch
//! id, each email that may have been sent is answered "outcome unknown" instead of being sent
//! twice, and the agent loop goes on to the end.
//!
//! Run it with `cargo run -p stepjournal --example tokio_agent`.

use std::collections::HashMap;
use std::error::Error;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::json;
use stepjournal::backends::JournalStore;
use stepjournal::backends::file::{FileOptions, FileStore};
use stepjournal::codec::{Entry, Replay, RunOutcome, SessionId};
use stepjournal::{
    CallCtx, Journal, JournalOptions, RecoverOptions, Run, StepOutcome, ToolError, Tools,
};

const SESSIONS: usize = 40;

/// The outside world: each email sent, by idempotency key.
#[derive(Clone, Default)]
struct Outbox(Arc<Mutex<HashMap<String, u32>>>);

impl Outbox {
    fn send(&self, key: &str) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()).entry(key.to_owned()).or_default() += 1;
    }

    fn most_sent(&self) -> u32 {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).values().copied().max().unwrap_or(0)
    }
}

#[derive(Deserialize)]
struct Search {
    q: String,
}

#[derive(Deserialize)]
struct Email {
    to: String,
}

/// Each tool once: schema, replay policy, handler.
fn tools(outbox: &Outbox) -> Tools {
    let outbox = outbox.clone();
    Tools::new()
        .tool(
            "search",
            json!({"type": "object", "required": ["q"]}),
            Replay::Safe,
            |args: Search, ctx: CallCtx| async move {
                ctx.output(format!("searching for {}", args.q)).await.map_err(ToolError::new)?;
                tokio::task::yield_now().await;
                Ok::<_, ToolError>(json!({"hits": args.q.len(), "attempt": ctx.attempt().get()}))
            },
        )
        .tool(
            "send_email",
            json!({"type": "object", "required": ["to"]}),
            Replay::Unsafe,
            move |args: Email, ctx: CallCtx| {
                let outbox = outbox.clone();
                async move {
                    outbox.send(ctx.idempotency_key());
                    Ok::<_, ToolError>(json!({"sent_to": args.to}))
                }
            },
        )
}

/// The scripted model: a search and an email, then an answer with no calls.
fn model(tools: &Tools, turn: usize) -> Result<Option<stepjournal::Reply>, Box<dyn Error>> {
    Ok(match turn {
        0 => Some(tools.reply(
            "Looking it up, then telling Ann.",
            [
                tools.call("c1", "search", json!({"q": "flights to Lisbon"}))?,
                tools.call("c2", "send_email", json!({"to": "ann@example.com"}))?,
            ],
        )?),
        1 => Some(tools.reply("Done: Ann has the flights.", [])?),
        _ => None,
    })
}

/// The agent loop of one run: the model's next reply, driven, until the model is done.
async fn agent_loop(run: Run, tools: &Tools) -> Result<(), Box<dyn Error + Send + Sync>> {
    loop {
        let turn = run.with_state(|s| s.replies().len());
        let reply = match model(tools, turn).map_err(|e| e.to_string())? {
            Some(reply) => reply,
            None => return Ok(run.end_async(RunOutcome::Completed).await?),
        };
        let step = run.commit_reply_async(reply).await?;
        match step.drive(tools).await? {
            StepOutcome::Committed { answers, .. } => drop(answers), // the model reads these
            other => return Err(format!("unexpected: {other:?}").into()),
        }
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let outbox = Outbox::default();
    let tools = tools(&outbox);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build()?;

    // The first process: half the sessions run to the end, the other half die mid-step.
    runtime.block_on(async {
        let store: Arc<dyn JournalStore> =
            Arc::new(FileStore::open(dir.path(), FileOptions::default())?);
        let journal = Journal::new(store, Arc::new(tools.clone()), JournalOptions::new())?;
        let mut tasks = Vec::new();
        for n in 0..SESSIONS {
            let (journal, tools, outbox) = (journal.clone(), tools.clone(), outbox.clone());
            tasks.push(tokio::spawn(async move {
                let session = SessionId::new(format!("user-{n}")).unwrap();
                let entry = Entry::NewTurn { message: "Find flights and tell Ann.".into() };
                let run = journal.begin_run_async(&session, entry).await?;
                if n % 2 == 0 {
                    return agent_loop(run, &tools).await;
                }
                // The process dies here: the reply is saved, both bodies started, and for some
                // sessions the email was sent but not recorded.
                let reply = model(&tools, 0).map_err(|e| e.to_string())?.ok_or("no reply")?;
                let step = run.commit_reply_async(reply).await?;
                let search = step.start_body_async(&"c1".into()).await?;
                let email = step.start_body_async(&"c2".into()).await?;
                if n % 4 == 1 {
                    outbox.send(email.idempotency_key());
                }
                drop(search);
                drop(email);
                Ok::<_, Box<dyn Error + Send + Sync>>(())
            }));
        }
        for task in tasks {
            task.await?.map_err(|e| e.to_string())?;
        }
        Ok::<_, Box<dyn Error>>(())
    })?;

    // The next start: the sessions whose runs crashed are recovered and go on.
    let recovered = runtime.block_on(async {
        let store: Arc<dyn JournalStore> =
            Arc::new(FileStore::open(dir.path(), FileOptions::default())?);
        let journal = Journal::new(store, Arc::new(tools.clone()), JournalOptions::new())?;
        let waiting = journal.sessions_to_recover()?;
        println!("{} sessions to recover", waiting.len());
        let options = RecoverOptions::new().concurrency(8);
        let report = journal
            .recover_all(&tools, options, |run, outcome| {
                let tools = tools.clone();
                async move {
                    if let Some(StepOutcome::Committed { answers, .. }) = outcome {
                        println!(
                            "{}: recovered step answered {} calls",
                            run.session(),
                            answers.len()
                        );
                    }
                    if let Err(e) = agent_loop(run, &tools).await {
                        eprintln!("the agent loop failed: {e}");
                    }
                }
            })
            .await?;
        assert!(journal.sessions_to_recover()?.is_empty(), "every session is done");
        Ok::<_, Box<dyn Error>>(report.recovered.len())
    })?;
    println!(
        "recovered {recovered} sessions; no email was sent twice: {}",
        outbox.most_sent() <= 1
    );
    assert_eq!(recovered, SESSIONS / 2);
    assert!(outbox.most_sent() <= 1);
    Ok(())
}
