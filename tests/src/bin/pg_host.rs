//! A runtime host for the multi-host fencing test: one process running the session writer on a
//! PostgreSQL store, talking to the test on its standard input and output (one line each way
//! per step, flushed), so that it can run inside a network namespace of its own.
//!
//! - `pg_host a URL SESSION`: begins a run (a new turn), commits a reply calling `c1`
//!   (`set_preference`, replay safe), starts its body and writes a chunk of output, then prints
//!   `body-started`. On a line `finish` it prints `finishing`, writes a late chunk (`late
//!   output`) and the body's result (`"late result"`), printing `output: R` and `result: R`,
//!   where R is `ok`, `fenced` or `error: MESSAGE`.
//! - `pg_host b URL SESSION`: wakes the session (a new run), prints `plan: ACTION` for `c1`,
//!   runs the recovered body to its result (`"b's result"`), commits the step, ends the run, and
//!   prints `recovered`.

#[cfg(feature = "postgres")]
fn main() -> std::process::ExitCode {
    use std::io::{BufRead, Write};
    use std::sync::Arc;

    use stepjournal::Reply;
    use stepjournal::WriteError;
    use stepjournal::recovery::MemoryRegistry;
    use stepjournal::writer::{Journal, JournalOptions};
    use stepjournal_backends::JournalStore;
    use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};
    use stepjournal_codec::{
        Call, CallId, CallKind, Entry, RawJson, Replay, RunOutcome, SessionId,
    };

    let args: Vec<String> = std::env::args().collect();
    let (Some(role), Some(url), Some(session)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: pg_host a|b URL SESSION");
        return std::process::ExitCode::from(2);
    };
    let store: Arc<dyn JournalStore> = match PostgresStore::connect(url, PostgresOptions::default())
    {
        Ok(store) => Arc::new(store),
        Err(e) => {
            eprintln!("pg_host {role}: cannot open the store: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let registry = MemoryRegistry::new().with_tool("set_preference", Replay::Safe);
    let journal = match Journal::new(store, Arc::new(registry), JournalOptions::new()) {
        Ok(journal) => journal,
        Err(e) => {
            eprintln!("pg_host {role}: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let session = match SessionId::new(session.as_str()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pg_host {role}: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let c1 = CallId::from("c1");
    let mut out = std::io::stdout().lock();
    let mut say = move |line: String| {
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    let told = |r: Result<(), WriteError>| match r {
        Ok(()) => "ok".to_owned(),
        Err(WriteError::Fenced { .. }) => "fenced".to_owned(),
        Err(e) => format!("error: {e}"),
    };
    let result: Result<(), String> = match role.as_str() {
        "a" => (|| {
            let run = journal
                .begin_run(&session, Entry::NewTurn { message: "set it".into() })
                .map_err(|e| e.to_string())?;
            let call = Call {
                call: c1.clone(),
                tool: "set_preference".into(),
                args: RawJson::parse(r#"{"seat":"aisle"}"#).map_err(|e| e.to_string())?,
                kind: CallKind::Tool,
                replay: Replay::Safe,
                group: None,
                sequential: false,
            };
            let step = run.commit_reply(Reply::new("").call(call)).map_err(|e| e.to_string())?;
            let body = step.start_body(&c1).map_err(|e| e.to_string())?;
            body.output_chunk("before the cut").map_err(|e| e.to_string())?;
            say("body-started".to_owned());
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).map_err(|e| e.to_string())?;
            if line.trim() != "finish" {
                return Err(format!("expected `finish`, got {line:?}"));
            }
            say("finishing".to_owned());
            say(format!("output: {}", told(body.output_chunk("late output"))));
            let late = RawJson::parse(r#""late result""#).map_err(|e| e.to_string())?;
            say(format!("result: {}", told(body.finish(late, false).map_err(|e| *e.error))));
            Ok(())
        })(),
        "b" => (|| {
            let run = journal.begin_run(&session, Entry::Wake).map_err(|e| e.to_string())?;
            let action = run.plan().call(&c1).map(|p| format!("{:?}", p.action));
            say(format!("plan: {}", action.unwrap_or_else(|| "none".to_owned())));
            let step = run.step().ok_or("the wake recovered no step")?;
            let body = step.start_body(&c1).map_err(|e| e.to_string())?;
            let output = RawJson::parse(r#""b's result""#).map_err(|e| e.to_string())?;
            body.finish(output, false).map_err(|e| e.to_string())?;
            step.commit().map_err(|e| e.to_string())?;
            run.end(RunOutcome::Completed).map_err(|e| e.to_string())?;
            say("recovered".to_owned());
            Ok(())
        })(),
        other => Err(format!("unknown role {other}")),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pg_host {role}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(not(feature = "postgres"))]
fn main() -> std::process::ExitCode {
    eprintln!("pg_host needs the `postgres` feature");
    std::process::ExitCode::from(2)
}
