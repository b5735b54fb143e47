//! `stepjournal demo`: a real crash and its recovery, on a fresh machine, with no set-up.
//!
//! The command starts a small agent session on a file journal in a child process (the same
//! binary, hidden subcommand `demo-child`), waits until the child says an unsafe and a safe
//! tool body are both running (their `attempt_started` durable, the bodies waiting), kills it
//! with SIGKILL, and recovers the session in this process with a `wake`: the safe call runs
//! again as attempt 2 under its dispatch id, the unsafe one is answered "outcome unknown" with
//! the output it had committed, the call queued behind it "not started". It prints each
//! decision with the rule that made it.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use clap::Args;
use serde_json::{Value, json};
use stepjournal_backends::file::{FileOptions, FileStore, is_journal_entry};
use stepjournal_backends::{JournalStore, OpenError, StoreError};
use stepjournal_codec::{
    Call, CallId, CallKind, Entry, PairReason, RawJson, Replay, RunOutcome, SessionId,
};
use stepjournal_recovery::{Action, CallPlan, SessionState};

use super::CliError;
use super::shown::Shown;
use stepjournal::registry::{RegistryError, SchemaRegistry};
use stepjournal::writer::SequentialIds;
use stepjournal::{BeginError, WriteError};
use stepjournal::{Journal, JournalOptions, Reply, Step};

/// What the child prints once both bodies are running.
const READY: &str = "bodies running";

/// How long the parent waits for the child to get its bodies running.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

const USER: &str = "Book the 9:00 flight to Lisbon tomorrow, remember that I like aisle seats, \
                    and email my manager the itinerary.";

/// Arguments of `stepjournal demo`.
#[derive(Debug, Args)]
#[command(after_help = "Runs a small agent session on a file journal in a child process, kills \
the child with SIGKILL while a safe and an unsafe tool are running, and recovers the session in \
a new process, printing what recovery decided for each call and why. Run it again to add another \
session to the same journal.")]
pub struct DemoArgs {
    /// The journal's directory: created if missing, reused if an earlier demo wrote it.
    #[arg(long, value_name = "DIR", default_value = "./stepjournal-demo")]
    pub dir: PathBuf,
    /// Stop after the crash: leave the session stuck mid-step, as a lost process leaves it, to
    /// inspect with `sessions`, `show` and `plan` (docs/cli.md walks through it). A later
    /// `stepjournal demo` leaves it as it is and runs a new session.
    #[arg(long)]
    pub no_recover: bool,
}

/// Arguments of the hidden `stepjournal demo-child` (the demo's crashing process).
#[derive(Debug, Args)]
pub struct DemoChildArgs {
    /// The journal's directory.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The session to run.
    #[arg(long, value_name = "SESSION")]
    pub session: String,
}

/// Why the demo could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// The directory exists and holds something other than a demo journal.
    #[error(
        "{} is not a demo journal: {why}; nothing was written. Choose another directory with \
         `--dir DIR`, or remove this one", .dir.display()
    )]
    NotDemo {
        /// The directory.
        dir: PathBuf,
        /// What is there.
        why: String,
    },
    /// A file or directory could not be read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file journal could not be opened.
    #[error("cannot open the journal in {}: {source}", .dir.display())]
    Open {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: OpenError,
    },
    /// The session id is not one a journal takes.
    #[error("cannot use session id `{}`: {source}", crate::shown::Shown(.session))]
    Session {
        /// The id given.
        session: String,
        /// Why not.
        #[source]
        source: stepjournal_codec::IdError,
    },
    /// The journal could not be read.
    #[error("cannot read the journal: {source}")]
    Store {
        /// Why.
        #[source]
        source: StoreError,
    },
    /// The demo's child process failed.
    #[error("the demo's child process {what}{}", child_errors(.stderr))]
    Child {
        /// What went wrong.
        what: String,
        /// What the child wrote on its standard error.
        stderr: String,
    },
    /// The session writer refused to begin a run.
    #[error("beginning a run of {session}: {source}")]
    Begin {
        /// The session.
        session: SessionId,
        /// Why.
        #[source]
        source: Box<BeginError>,
    },
    /// An append of the session writer failed.
    #[error("{doing}: {source}")]
    Write {
        /// What was being done.
        doing: String,
        /// Why.
        #[source]
        source: Box<WriteError>,
    },
    /// The demo's tool registry did not build.
    #[error("the demo's tool registry: {0}")]
    Registry(#[from] RegistryError),
    /// No session writer could be made over the journal.
    #[error("{source}")]
    Journal {
        /// Why.
        #[source]
        source: stepjournal::JournalError,
    },
}

impl From<DemoError> for CliError {
    fn from(e: DemoError) -> Self {
        CliError::Demo(Box::new(e))
    }
}

fn child_errors(stderr: &str) -> String {
    if stderr.trim().is_empty() { String::new() } else { format!("; it said: {}", stderr.trim()) }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DemoError + '_ {
    move |source| DemoError::Io { path: path.to_owned(), source }
}

fn write_error(doing: impl Into<String>) -> impl FnOnce(WriteError) -> DemoError {
    let doing = doing.into();
    move |source| DemoError::Write { doing, source: Box::new(source) }
}

/// The demo's tools as they are now: policies and input schemas.
fn registry() -> Result<SchemaRegistry, RegistryError> {
    let object = json!({ "type": "object" });
    SchemaRegistry::from_tools_json(&json!({
        "search_flights": { "replay": "safe", "input_schema": object },
        "set_preference": {
            "replay": "safe",
            "input_schema": {
                "type": "object",
                "required": ["key", "value"],
                "properties": { "key": { "type": "string" }, "value": { "type": "string" } }
            }
        },
        "send_email": { "replay": "unsafe", "input_schema": object },
        "archive_email": { "replay": "safe", "input_schema": object },
    }))
}

/// The model's reply: a search that finishes, a safe preference and an unsafe email that are
/// running at the crash, and an archive queued behind the email in group `email`.
fn calls() -> Vec<Call> {
    let call = |id: &str, tool: &str, args: Value, replay: Replay, group: Option<&str>| Call {
        call: CallId::from(id),
        tool: tool.into(),
        args: RawJson::from_value(&args).unwrap_or_default(),
        kind: CallKind::Tool,
        replay,
        group: group.map(str::to_owned),
        sequential: false,
    };
    vec![
        call("c1", "search_flights", json!({"to": "LIS", "at": "09:00"}), Replay::Safe, None),
        call("c2", "set_preference", json!({"key": "seat", "value": "aisle"}), Replay::Safe, None),
        call(
            "c3",
            "send_email",
            json!({"to": "manager@example.com", "subject": "Itinerary: Lisbon, 9:00"}),
            Replay::Unsafe,
            Some("email"),
        ),
        call("c4", "archive_email", json!({"folder": "travel"}), Replay::Safe, Some("email")),
    ]
}

fn journal(dir: &Path, ids: &str) -> Result<Journal, DemoError> {
    let store = FileStore::open(dir, FileOptions::default())
        .map_err(|source| DemoError::Open { dir: dir.to_owned(), source })?;
    let options = JournalOptions::new().ids(Arc::new(SequentialIds::with_prefix(ids)));
    Journal::new(Arc::new(store), Arc::new(registry()?), options)
        .map_err(|source| DemoError::Journal { source })
}

/// Runs `stepjournal demo`. `program` is the `stepjournal` executable the crashing child runs
/// (its hidden `demo-child` subcommand): the binary passes itself.
pub fn run(args: &DemoArgs, program: &Path, out: &mut dyn Write) -> Result<(), CliError> {
    demo(&args.dir, program, !args.no_recover, out)
}

/// Runs the hidden `stepjournal demo-child`: the session up to two running bodies, then a line
/// on standard output, then it waits (for the SIGKILL; or, if its parent goes away, until its
/// standard input closes).
pub fn run_child(args: &DemoChildArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let session = SessionId::new(args.session.clone())
        .map_err(|source| DemoError::Session { session: args.session.clone(), source })?;
    let journal = journal(&args.dir, session.as_str())?;
    let run = journal.begin_run(&session, Entry::NewTurn { message: USER.to_owned() }).map_err(
        |source| DemoError::Begin { session: session.clone(), source: Box::new(source) },
    )?;
    let reply = calls().into_iter().fold(
        Reply::new("I'll find the flight, save your seat preference and email your manager."),
        Reply::call,
    );
    let step = run.commit_reply(reply).map_err(write_error("committing the reply"))?;
    let search = step.start_body(&CallId::from("c1")).map_err(write_error("starting c1"))?;
    search.output_chunk("searching flights to LIS").map_err(write_error("c1's output"))?;
    let found = json!({"flights": [{"flight": "TP 1351", "departs": "09:00", "seat": "14C"}]});
    let found = RawJson::from_value(&found).unwrap_or_default();
    search.finish(found, false).map_err(|e| write_error("finishing c1")(*e.error))?;
    let preference = step.start_body(&CallId::from("c2")).map_err(write_error("starting c2"))?;
    preference.output_chunk("saving seat preference: aisle").map_err(write_error("c2's output"))?;
    let email = step.start_body(&CallId::from("c3")).map_err(write_error("starting c3"))?;
    email
        .output_chunk("connected to smtp.example.com; sending")
        .map_err(write_error("c3's output"))?;
    writeln!(out, "{READY}")?;
    out.flush()?;
    // The bodies are running: wait for the end (the parent's SIGKILL).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop((preference, email, step, run));
    Ok(())
}

/// Checks that `dir` is missing, empty or an earlier demo's journal: a directory holding only a
/// file journal's own entries, whose sessions are all the demo's. Nothing else is written there,
/// so the journal stays one any store URL opens.
fn prepare(dir: &Path) -> Result<(), DemoError> {
    if dir.exists() {
        if !dir.is_dir() {
            return Err(DemoError::NotDemo { dir: dir.to_owned(), why: "it is a file".into() });
        }
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map_err(io(dir))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let foreign: Vec<&str> =
            names.iter().map(String::as_str).filter(|n| !is_journal_entry(n)).collect();
        if !foreign.is_empty() {
            let shown: Vec<&str> = foreign.iter().take(3).copied().collect();
            let why = format!(
                "it holds {} entr{} a file journal does not write ({}{})",
                foreign.len(),
                if foreign.len() == 1 { "y" } else { "ies" },
                shown.join(", "),
                if foreign.len() > shown.len() { ", ..." } else { "" }
            );
            return Err(DemoError::NotDemo { dir: dir.to_owned(), why });
        }
        if !names.is_empty() && !holds_demo_journal(dir) {
            let why = "it holds a file journal with sessions the demo did not write".to_owned();
            return Err(DemoError::NotDemo { dir: dir.to_owned(), why });
        }
    }
    std::fs::create_dir_all(dir).map_err(io(dir))
}

/// Whether `dir` holds a file journal whose sessions are all the demo's.
fn holds_demo_journal(dir: &Path) -> bool {
    let Ok(store) = FileStore::open_read_only(dir) else { return false };
    store.sessions().is_ok_and(|s| s.iter().all(|s| demo_number(s).is_some()))
}

fn demo_number(session: &SessionId) -> Option<u64> {
    session.as_str().strip_prefix("demo-")?.parse().ok()
}

/// Kills the child when the demo stops early.
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn demo(dir: &Path, program: &Path, recover: bool, out: &mut dyn Write) -> Result<(), CliError> {
    prepare(dir)?;
    let url = format!("file:{}", dir.display());
    let session = {
        let store = FileStore::open(dir, FileOptions::default())
            .map_err(|source| DemoError::Open { dir: dir.to_owned(), source })?;
        let sessions = store.sessions().map_err(|source| DemoError::Store { source })?;
        let n = sessions.iter().filter_map(demo_number).max().unwrap_or(0) + 1;
        let id = format!("demo-{n}");
        SessionId::new(id.clone()).map_err(|source| DemoError::Session { session: id, source })?
    };
    writeln!(out, "stepjournal demo: a real crash and its recovery")?;
    writeln!(out, "journal: {url}   session: {session}\n")?;

    writeln!(out, "1. A child process runs the agent session. The user asks:")?;
    writeln!(out, "     \"{USER}\"")?;
    writeln!(out, "   The model's reply and its 4 calls are saved before any tool starts:")?;
    for c in calls() {
        let group = c.group.as_deref().map_or(String::new(), |g| format!("group `{g}`"));
        let line =
            format!("     {}  {:<15} {:<7} {group}", c.call, c.tool.as_str(), c.replay.as_str());
        writeln!(out, "{}", line.trim_end())?;
    }
    writeln!(out, "   The child finishes c1, then starts c2 and c3; each commits some output.")?;
    out.flush()?;
    let (pid, status) = crash_a_child(program, dir, &session)?;
    writeln!(out, "   With c2 and c3 both running, the child (pid {pid}) is killed with SIGKILL:")?;
    writeln!(out, "   {}. Nothing was finished, committed or closed.\n", died(status))?;
    if !recover {
        let bin = shown_program(program);
        writeln!(out, "The session is left as the crash left it (--no-recover). Inspect it:")?;
        writeln!(out, "  {bin} sessions {url} --state crashed")?;
        writeln!(out, "  {bin} calls {url} {session}")?;
        writeln!(out, "  {bin} plan {url} {session} --entry wake")?;
        return Ok(());
    }

    let journal = journal(dir, &format!("{session}-recovery"))?;
    let state = journal.state(&session).map_err(|source| DemoError::Store { source })?;
    writeln!(out, "2. This process opens the journal. What the crash left:")?;
    describe_left(&state, out)?;
    let run = journal.begin_run(&session, Entry::Wake).map_err(|source| DemoError::Begin {
        session: session.clone(),
        source: Box::new(source),
    })?;
    writeln!(out, "\n3. It wakes the session (run {}). Recovery decides each call:", run.id())?;
    for decision in &run.plan().calls {
        let tool = tool_of(&state, &decision.call);
        writeln!(out, "   {} {tool}: {}", decision.call, action_said(decision))?;
        writeln!(out, "      rule {}: {}", decision.rule.id, decision.rule.why)?;
    }

    writeln!(out, "\n4. It acts on the plan:")?;
    let step = run.step().ok_or_else(|| DemoError::Child {
        what: "left no open step to recover".into(),
        stderr: String::new(),
    })?;
    for decision in &run.plan().calls {
        if let Action::Run { .. } = decision.action {
            rerun(&step, &decision.call, &tool_of(&state, &decision.call), out)?;
        }
    }
    step.commit().map_err(write_error("committing the recovered step"))?;
    let text = "Your flight is booked and your aisle preference saved. I could not confirm that \
                the itinerary email went out: please check before I send it again.";
    run.commit_reply(Reply::new(text))
        .and_then(|s| s.commit())
        .map_err(write_error("committing the closing reply"))?;
    run.end(RunOutcome::Completed).map_err(write_error("ending the run"))?;
    writeln!(out, "   The step is committed; the model tells the user:\n     \"{text}\"")?;
    writeln!(out, "   The run ended completed.\n")?;

    writeln!(out, "What happened, in plain words:")?;
    for decision in &run.plan().calls {
        let tool = tool_of(&state, &decision.call);
        let partial = state.call(&decision.call).map(|c| c.partial()).unwrap_or_default();
        writeln!(out, "  - {}", plain(decision, &tool, &partial))?;
    }
    // The hint names the very binary that ran the demo (`target/release/stepjournal` after
    // `cargo run --release`), so that it runs as printed, on PATH or not.
    let bin = shown_program(program);
    writeln!(out, "\nInspect the journal (with the binary that ran this demo):")?;
    writeln!(out, "  {bin} sessions {url}")?;
    writeln!(out, "  {bin} show {url} {session}")?;
    writeln!(out, "  {bin} calls {url} {session}")?;
    writeln!(out, "  {bin} view {url} {session} -o session.html")?;
    Ok(())
}

/// The program as the hint prints it: relative to the working directory when it is under it.
fn shown_program(program: &Path) -> String {
    let relative = std::env::current_dir().ok().and_then(|cwd| {
        program.strip_prefix(&cwd).ok().map(|p| Path::new(".").join(p).display().to_string())
    });
    Shown(relative.unwrap_or_else(|| program.display().to_string())).to_string()
}

/// Starts the child, waits for its bodies to run, kills it. Returns its pid and exit status.
fn crash_a_child(
    program: &Path,
    dir: &Path,
    session: &SessionId,
) -> Result<(u32, ExitStatus), DemoError> {
    let child = Command::new(program)
        .arg("demo-child")
        .arg("--dir")
        .arg(dir)
        .arg("--session")
        .arg(session.as_str())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io(program))?;
    let mut guard = Guard(Some(child));
    let child = guard
        .0
        .as_mut()
        .ok_or_else(|| DemoError::Child { what: "was lost".into(), stderr: String::new() })?;
    let pid = child.id();
    let stdout = child.stdout.take();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let ready = stdout
            .is_some_and(|s| BufReader::new(s).lines().any(|l| l.is_ok_and(|l| l.trim() == READY)));
        let _ = tx.send(ready);
    });
    let ready = rx.recv_timeout(CHILD_TIMEOUT).unwrap_or(false);
    let Some(mut child) = guard.0.take() else {
        return Err(DemoError::Child { what: "was lost".into(), stderr: String::new() });
    };
    // SIGKILL on Unix: no handler runs, nothing is flushed or closed in order.
    let killed = child.kill();
    let status = child.wait().map_err(io(program))?;
    if !ready || killed.is_err() {
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut stderr);
        }
        let what = if ready {
            "could not be killed".to_owned()
        } else {
            format!("did not get its bodies running ({})", died(status))
        };
        return Err(DemoError::Child { what, stderr });
    }
    Ok((pid, status))
}

fn died(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            let name = if signal == 9 { " (SIGKILL)" } else { "" };
            return format!("it died of signal {signal}{name}");
        }
    }
    format!("it exited: {status}")
}

fn tool_of(state: &SessionState, call: &CallId) -> String {
    state.call(call).map(|c| c.call().tool.as_str().to_owned()).unwrap_or_default()
}

fn describe_left(state: &SessionState, out: &mut dyn Write) -> std::io::Result<()> {
    let Some(reply) = state.saved_step() else {
        return writeln!(out, "   no open step");
    };
    for c in state.calls_of(reply) {
        let what = match (c.last_attempt(), c.results().next()) {
            (None, _) => "no body started".to_owned(),
            (Some(a), Some(r)) => format!("attempt {a} finished: {}", r.output),
            (Some(a), None) => {
                format!("attempt {a} started, output so far {:?}, no result", c.partial())
            }
        };
        writeln!(out, "   {} {}: {what}", c.id(), c.call().tool)?;
    }
    Ok(())
}

fn action_said(decision: &CallPlan) -> String {
    match &decision.action {
        Action::Run { dispatch, attempt } => {
            let d = dispatch.as_ref().map_or("a new one".to_owned(), |d| d.to_string());
            format!("run again as attempt {attempt}, same dispatch id {d}")
        }
        Action::Pair { reason } => format!("answered `{}`", reason.as_str()),
        other => other.name().to_owned(),
    }
}

/// Runs a call's body again, as the plan says, and finishes it.
fn rerun(step: &Step, call: &CallId, tool: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let body = step.start_body(call).map_err(write_error(format!("starting {call} again")))?;
    let line = format!(
        "   {call} {tool} ran again as attempt {} with the same dispatch id {} (idempotency key \
         {}), and finished.",
        body.attempt(),
        body.dispatch(),
        body.idempotency_key()
    );
    let saved = RawJson::from_value(&json!({"saved": true})).unwrap_or_default();
    body.finish(saved, false).map_err(|e| write_error(format!("finishing {call}"))(*e.error))?;
    writeln!(out, "{line}")?;
    Ok(())
}

fn plain(decision: &CallPlan, tool: &str, partial: &str) -> String {
    let call = &decision.call;
    let rule = decision.rule.id;
    match &decision.action {
        Action::Keep => format!(
            "Kept: {call} {tool}. Its result was saved before the crash, so nothing runs again \
             (rule {rule})."
        ),
        Action::Run { dispatch, attempt } => format!(
            "Ran again: {call} {tool}, as attempt {attempt} with the same dispatch id {}. It is \
             safe to repeat, and a service keyed on the dispatch id sees the same request \
             (rule {rule}).",
            dispatch.as_ref().map_or("(new)".to_owned(), |d| d.to_string())
        ),
        Action::Pair { reason: PairReason::OutcomeUnknown } => format!(
            "Answered outcome unknown: {call} {tool}, with the output it had committed \
             ({partial:?}). It may or may not have taken effect, so it is never run twice on its \
             own; the model is told to check first (rule {rule})."
        ),
        Action::Pair { reason: PairReason::NotStarted } => format!(
            "Not started: {call} {tool}. It was to run after a call whose outcome is unknown, so \
             it does not run, and the model is told so (rule {rule})."
        ),
        _ => format!("{call} {tool}: {} (rule {rule}).", action_said(decision)),
    }
}
