//! A runtime process for the tests of several actors at once (`actors_process`): the session
//! writer and `drive` over a store named by URL (`sqlite:PATH` or `postgres://...`), talking
//! to the test on its standard input and output, one line each way per step, flushed.
//!
//! - `runtime_child crash URL PREFIX SESSIONS TTL_MS`: with leases of TTL_MS, writes sessions
//!   `PREFIX-0` .. `PREFIX-(SESSIONS-1)`, each a run mid-step: a new turn, a reply calling `c1`
//!   (`lookup`, replay safe, in even sessions; `charge`, replay unsafe, in odd ones) and its
//!   body started; prints `ready` and keeps the runs open (their leases renewed) until it is
//!   killed.
//! - `runtime_child recover URL TTL_MS CONCURRENCY`: opens the store, prints `ready`, waits for
//!   a line on its standard input (so that two of them start together), runs
//!   `Journal::recover_all` with the tools, CONCURRENCY sessions at once, ends each recovered
//!   run `completed`, and prints its report, one line each:
//!   `recovered S..`, `changed S..`, `skipped S..`, `waiting S..`, `failed S..` (the sessions in
//!   each list), then `ended S ok` or `ended S error: MESSAGE` per recovered run, then `done`.
//! - `runtime_child takeover URL TTL_MS`: as `recover`, at once (no line awaited), 8 sessions
//!   at once.
//! - `runtime_child freeze URL SESSION TTL_MS GATE`: with leases of TTL_MS, begins a run of
//!   SESSION, prints `run RUN`, commits a reply calling `c1` (`slow`, replay safe) and drives
//!   it; the body prints `body-started` and waits until the file GATE exists, then returns
//!   `{"by":"a"}`. Then prints `drive: R`, tries to end the run `completed` and prints
//!   `end: R`, where R is `ok`, `fenced` or `error: MESSAGE`.
//!
//! In `recover` and `takeover` the body of `slow` returns `{"by":"b"}` at once; `lookup` and
//! `charge` return `{"by":"b"}` too.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use stepjournal::writer::block_on;
use stepjournal::{CallCtx, Journal, JournalOptions, RecoverOptions, ToolError, Tools, WriteError};
use stepjournal_backends::{JournalStore, OpenOptions, open_url};
use stepjournal_codec::{Entry, RunOutcome, SessionId};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let usage = "usage: runtime_child crash URL PREFIX SESSIONS TTL_MS \
                 | recover URL TTL_MS CONCURRENCY | takeover URL TTL_MS \
                 | freeze URL SESSION TTL_MS GATE";
    let ttl = |i: usize| arg(i).parse::<u64>().ok().map(Duration::from_millis);
    let result = match arg(0).as_str() {
        "crash" => match (arg(3).parse::<usize>().ok(), ttl(4)) {
            (Some(sessions), Some(ttl)) => crash(&arg(1), &arg(2), sessions, ttl),
            _ => Err(usage.to_owned()),
        },
        "recover" => match (ttl(2), arg(3).parse::<usize>().ok()) {
            (Some(ttl), Some(concurrency)) => recover(&arg(1), ttl, Some(concurrency)),
            _ => Err(usage.to_owned()),
        },
        "takeover" => match ttl(2) {
            Some(ttl) => recover(&arg(1), ttl, None),
            None => Err(usage.to_owned()),
        },
        "freeze" => match ttl(3) {
            Some(ttl) => freeze(&arg(1), &arg(2), ttl, PathBuf::from(arg(4))),
            None => Err(usage.to_owned()),
        },
        _ => Err(usage.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runtime_child {}: {e}", arg(0));
            ExitCode::FAILURE
        }
    }
}

/// Prints one line to the test, flushed.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The tools every role defines. With `gate`, the body of `slow` waits for that file and
/// returns `{"by":"a"}`; without, it returns `{"by":"b"}` at once, as `lookup` and `charge` do.
fn tools(gate: Option<PathBuf>) -> Tools {
    let quick = |_: Value, _: CallCtx| async { Ok::<_, ToolError>(json!({"by": "b"})) };
    Tools::new()
        .tool("lookup", json!({"type": "object"}), stepjournal_codec::Replay::Safe, quick)
        .tool("charge", json!({"type": "object"}), stepjournal_codec::Replay::Unsafe, quick)
        .tool(
            "slow",
            json!({"type": "object"}),
            stepjournal_codec::Replay::Safe,
            move |_: Value, _: CallCtx| {
                let gate = gate.clone();
                async move {
                    let Some(gate) = gate else { return Ok(json!({"by": "b"})) };
                    say("body-started");
                    // The body runs on, whatever befalls its run, until the test lets it finish
                    // (after the process was frozen and thawed).
                    while !gate.exists() {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Ok::<_, ToolError>(json!({"by": "a"}))
                }
            },
        )
}

fn open(url: &str, tools: &Tools, ttl: Duration) -> Result<Journal, String> {
    let store: Arc<dyn JournalStore> =
        open_url(url, OpenOptions::create()).map_err(|e| format!("cannot open the store: {e}"))?;
    Journal::new(store, Arc::new(tools.clone()), JournalOptions::new().lease_ttl(ttl))
        .map_err(|e| format!("cannot make the journal: {e}"))
}

fn session(name: &str) -> Result<SessionId, String> {
    SessionId::new(name).map_err(|e| e.to_string())
}

fn told(r: &Result<(), WriteError>) -> String {
    match r {
        Ok(()) => "ok".to_owned(),
        Err(WriteError::Fenced { .. }) => "fenced".to_owned(),
        Err(e) => format!("error: {e}"),
    }
}

fn crash(url: &str, prefix: &str, sessions: usize, ttl: Duration) -> Result<(), String> {
    let tools = tools(None);
    let journal = open(url, &tools, ttl)?;
    // Every run and body is kept until the process is killed: the runs stay open here, their
    // leases renewed by the keeper.
    let mut held = Vec::new();
    for n in 0..sessions {
        let s = session(&format!("{prefix}-{n}"))?;
        let run = journal
            .begin_run(&s, Entry::NewTurn { message: "look it up".into() })
            .map_err(|e| format!("{s}: {e}"))?;
        let tool = if n % 2 == 0 { "lookup" } else { "charge" };
        let call = tools.call("c1", tool, json!({"n": n})).map_err(|e| e.to_string())?;
        let reply = tools.reply("On it.", [call]).map_err(|e| e.to_string())?;
        let step = run.commit_reply(reply).map_err(|e| format!("{s}: {e}"))?;
        let body = step.start_body(&"c1".into()).map_err(|e| format!("{s}: {e}"))?;
        held.push((run, step, body));
    }
    say("ready");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// `recover` (with its concurrency: after a line on standard input) or `takeover` (`None`).
fn recover(url: &str, ttl: Duration, race: Option<usize>) -> Result<(), String> {
    let tools = tools(None);
    let journal = open(url, &tools, ttl)?;
    if race.is_some() {
        say("ready");
        let mut go = String::new();
        std::io::stdin().lock().read_line(&mut go).map_err(|e| e.to_string())?;
    }
    let ended = Mutex::new(Vec::new());
    let options = RecoverOptions::new().concurrency(race.unwrap_or(8));
    let report = block_on(journal.recover_all(&tools, options, |run, _| {
        let ended = &ended;
        async move {
            let r = run.end_async(RunOutcome::Completed).await;
            ended.lock().unwrap_or_else(|p| p.into_inner()).push((run.session().clone(), r));
        }
    }))
    .map_err(|e| format!("recover_all: {e}"))?;
    let names = |sessions: Vec<&SessionId>| {
        sessions.iter().map(|s| format!(" {s}")).collect::<Vec<_>>().concat()
    };
    say(&format!("recovered{}", names(report.recovered.iter().collect())));
    say(&format!("changed{}", names(report.changed.iter().collect())));
    say(&format!("skipped{}", names(report.skipped.iter().map(|(s, _)| s).collect())));
    say(&format!("waiting{}", names(report.waiting.iter().map(|(s, _)| s).collect())));
    say(&format!("failed{}", names(report.failed.iter().map(|(s, _)| s).collect())));
    for (s, why) in &report.failed {
        eprintln!("runtime_child: {s} failed: {why}");
    }
    for (s, r) in ended.into_inner().unwrap_or_else(|p| p.into_inner()) {
        say(&format!("ended {s} {}", told(&r)));
    }
    block_on(journal.shutdown(Duration::from_secs(5)));
    say("done");
    Ok(())
}

fn freeze(url: &str, name: &str, ttl: Duration, gate: PathBuf) -> Result<(), String> {
    let tools = tools(Some(gate));
    let journal = open(url, &tools, ttl)?;
    let s = session(name)?;
    let run = journal
        .begin_run(&s, Entry::NewTurn { message: "take your time".into() })
        .map_err(|e| e.to_string())?;
    say(&format!("run {}", run.id()));
    let call = tools.call("c1", "slow", json!({})).map_err(|e| e.to_string())?;
    let reply = tools.reply("Working.", [call]).map_err(|e| e.to_string())?;
    let step = run.commit_reply(reply).map_err(|e| e.to_string())?;
    let driven = match block_on(step.drive(&tools)) {
        Ok(_) => "ok".to_owned(),
        Err(e) => match e.write_error() {
            Some(WriteError::Fenced { .. }) => "fenced".to_owned(),
            _ => format!("error: {e}"),
        },
    };
    say(&format!("drive: {driven}"));
    say(&format!("end: {}", told(&run.end(RunOutcome::Completed))));
    Ok(())
}
