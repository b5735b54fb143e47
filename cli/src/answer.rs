//! `stepjournal answer`, `approve` and `deny`: the answer to a waiting client call, the
//! decision on an approval-gated call, written through the session writer as the runtime API's
//! `Journal::answer_client` and `Journal::decide_approval` write them: in a `wake` run that
//! recovers the saved step. The run then suspends if other calls of the step still wait;
//! otherwise it is left to the runtime, whose recovery goes on with the step (it runs what
//! must run and hands the answers to the model).

use std::io::Write;
use std::sync::Arc;

use clap::Args;
use stepjournal::AnswerError;
use stepjournal::writer::block_on;
use stepjournal_backends::JournalStore;
use stepjournal_codec::json::event_to_json;
use stepjournal_codec::{CallId, CallKind, Entry, Event, Operator, RawJson, SessionId};
use stepjournal_recovery::{Action, ApprovalState, Config, SessionState};

use super::CliError;
use super::act::{
    journal, let_go, open_to_write, read_state, refuse_if_running, write_events, written_since,
};
use super::error::ActionError;
use super::operator::{OperatorArgs, operator_text};
use super::plan::{StorePlan, dry_plan, explain};
use super::shown::{Shown, StoreName, json_for_terminal};

/// Arguments of `stepjournal answer`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  stepjournal answer sqlite:journal.db SESSION c2 --output '{\"seat\":\"14C\"}'\n  \
stepjournal answer file:./journal SESSION c2 --output '\"yes\"' --dry-run\n\n\
Writes the client's answer to client call CALL of the session's saved step (`client_answer`) \
through the session writer, in a wake run, as `Journal::answer_client` does. If other calls of \
the step still wait, the run suspends on them; otherwise the run is left for the runtime's \
recovery (`sessions_to_recover` lists it) to go on with the step. Refused, nothing written, \
when no unresolved client call CALL waits, or when a runtime is running the session (its live \
lease: answer through the runtime). The wake's `run_started` records who answered and why \
(--as, default $STEPJOURNAL_OPERATOR, $USER or $LOGNAME; --reason). --dry-run prints the wake's plan and the events it would \
write, and writes nothing."
)]
pub struct AnswerArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// The session.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The client call.
    #[arg(value_name = "CALL")]
    pub call: String,
    /// The answer: any JSON value.
    #[arg(long, value_name = "JSON")]
    pub output: String,
    /// Print what would be written; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Who acts, and why (`--as`, `--reason`): recorded on the wake run's `run_started`.
    #[command(flatten)]
    pub by: OperatorArgs,
}

/// Arguments of `stepjournal approve` and `stepjournal deny`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal approve sqlite:journal.db SESSION c3\n  \
stepjournal deny postgres://u@db/app SESSION c3 --dry-run\n\n\
Records the decision on approval-gated call CALL of the session's saved step \
(`approval_decided`) through the session writer, in a wake run, as `Journal::decide_approval` \
does. An approved call runs when the runtime's recovery goes on with the step; a denied call \
is answered with the denial. Refused, nothing written, when the call is not an undecided \
approval call, or when a runtime is running the session. The wake's `run_started` records who \
decided and why (--as, default $STEPJOURNAL_OPERATOR, $USER or $LOGNAME; --reason). --dry-run \
prints the plan and the events it would write, and writes nothing.")]
pub struct DecideArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// The session.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The approval-gated call.
    #[arg(value_name = "CALL")]
    pub call: String,
    /// Print what would be written; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Who acts, and why (`--as`, `--reason`): recorded on the wake run's `run_started`.
    #[command(flatten)]
    pub by: OperatorArgs,
}

/// What is written for the call.
#[derive(Debug, Clone)]
enum Answer {
    Client(RawJson),
    Approval(bool),
}

impl Answer {
    fn command(&self) -> &'static str {
        match self {
            Answer::Client(_) => "answer",
            Answer::Approval(true) => "approve",
            Answer::Approval(false) => "deny",
        }
    }

    fn event(&self, call: &CallId) -> Event {
        match self {
            Answer::Client(output) => Event::ClientAnswer(stepjournal_codec::ClientAnswer {
                call: call.clone(),
                output: output.clone(),
            }),
            Answer::Approval(approved) => {
                Event::ApprovalDecided(stepjournal_codec::ApprovalDecided {
                    call: call.clone(),
                    approved: *approved,
                })
            }
        }
    }
}

/// Runs `stepjournal answer`.
pub fn run_answer(args: &AnswerArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let output = RawJson::parse(&args.output)
        .map_err(|e| CliError::Usage { option: "--output", reason: format!("not JSON: {e}") })?;
    let by = args.by.operator()?;
    let request = Request { store: &args.store, session: &args.session, call: &args.call, by };
    act(&request, Answer::Client(output), args.dry_run, out)
}

/// Runs `stepjournal approve` (`approved`) or `stepjournal deny`.
pub fn run_decide(args: &DecideArgs, approved: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let by = args.by.operator()?;
    let request = Request { store: &args.store, session: &args.session, call: &args.call, by };
    act(&request, Answer::Approval(approved), args.dry_run, out)
}

struct Request<'a> {
    store: &'a str,
    session: &'a str,
    call: &'a str,
    by: Option<Operator>,
}

/// Whether `call` waits for this answer in the saved step.
fn waits(state: &SessionState, call: &CallId, answer: &Answer) -> bool {
    state.saved_step().is_some_and(|reply| {
        state.calls_of(reply).iter().any(|r| {
            r.id() == call
                && !r.is_resolved()
                && match answer {
                    Answer::Client(_) => r.kind() == CallKind::Client,
                    Answer::Approval(_) => {
                        r.kind() == CallKind::Approval && r.approval() == ApprovalState::Undecided
                    }
                }
        })
    })
}

fn act(
    request: &Request<'_>,
    answer: Answer,
    dry_run: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let url = request.store;
    let session = SessionId::from_stored(request.session);
    let call = CallId::from(request.call);
    let by = &request.by;
    if dry_run {
        let store = super::store::open_read(url)?;
        let (records, state) = read_state(&*store, url, &session)?;
        if !waits(&state, &call, &answer) {
            return Err(not_waiting(url, &session, &call, &answer));
        }
        let plan = dry_plan(&state, records.len() as u64, Entry::Wake, &Config::default());
        let request = StorePlan {
            url,
            session: &session,
            entry: Entry::Wake,
            tools: None,
            config: Config::default(),
            on_corruption: Default::default(),
        };
        explain(&request, &plan, &state, out)?;
        if let Some(by) = by {
            writeln!(out, "the run_started would record who and why: {}", operator_text(by))?;
        }
        let at = records.len() as u64 + plan.appends.len() as u64;
        writeln!(out, "then the {} in its own batch at seq {at}:", answer.command())?;
        writeln!(out, "  {at}  {}", json_for_terminal(&event_to_json(&answer.event(&call))))?;
        let others = others_waiting(&plan, &state, &call);
        if others.is_empty() {
            writeln!(
                out,
                "then the run is left for the runtime's recovery to go on with the step"
            )?;
        } else {
            writeln!(out, "then the run suspends on {}", list(&others))?;
        }
        return Ok(());
    }
    let store = open_to_write(url, answer.command())?;
    write(store, url, &session, &call, &answer, request.by.clone(), out)
}

/// `stepjournal answer` on a store already open for writing: the client's `output` for client
/// call `call` of `session`, through the session writer; prints what was written.
pub fn answer_on(
    store: Arc<dyn JournalStore>,
    url: &str,
    session: &SessionId,
    call: &CallId,
    output: RawJson,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    write(store, url, session, call, &Answer::Client(output), None, out)
}

/// `stepjournal approve` (`approved`) or `deny` on a store already open for writing.
pub fn decide_on(
    store: Arc<dyn JournalStore>,
    url: &str,
    session: &SessionId,
    call: &CallId,
    approved: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    write(store, url, session, call, &Answer::Approval(approved), None, out)
}

fn not_waiting(url: &str, session: &SessionId, call: &CallId, answer: &Answer) -> CliError {
    CliError::Action {
        url: StoreName::of(url),
        session: session.clone(),
        what: answer.command(),
        source: Box::new(ActionError::Answer(AnswerError::NotWaiting {
            session: session.clone(),
            call: call.clone(),
            what: match answer {
                Answer::Client(_) => "a client answer",
                Answer::Approval(_) => "an approval decision",
            },
        })),
    }
}

/// Writes the answer through the session writer and prints what was written.
fn write(
    store: Arc<dyn JournalStore>,
    url: &str,
    session: &SessionId,
    call: &CallId,
    answer: &Answer,
    by: Option<Operator>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let (session, call) = (session.clone(), call.clone());
    let (_, state) = read_state(&*store, url, &session)?;
    if !waits(&state, &call, answer) {
        return Err(not_waiting(url, &session, &call, answer));
    }
    refuse_if_running(&*store, url, &session, &state, answer.command())?;
    let action = |source: ActionError| CliError::Action {
        url: StoreName::of(url),
        session: session.clone(),
        what: answer.command(),
        source: Box::new(source),
    };
    let (journal, owner) = journal(Arc::clone(&store), &state, by).map_err(|e| action(e.into()))?;
    let action_error = |source: AnswerError| action(source.into());
    let run = match &answer {
        Answer::Client(output) => block_on(journal.answer_client(&session, &call, output.clone())),
        Answer::Approval(approved) => block_on(journal.decide_approval(&session, &call, *approved)),
    }
    .map_err(action_error)?;
    let others = others_waiting(run.plan(), &state, &call);
    let mut tail_note =
        "the run is left for the runtime's recovery to go on with the step".to_owned();
    if let (Some(step), false) = (run.step(), others.is_empty()) {
        let waiting: Vec<CallId> =
            others.iter().filter(|c| !step.is_resolved(c)).cloned().collect();
        match step.suspend(&waiting) {
            Ok(()) => tail_note = format!("the run suspended on {}", list(&waiting)),
            Err(e) => tail_note = format!("{tail_note} (it could not suspend: {e})"),
        }
    }
    let at = run.begun_at().get();
    let run_id = run.id().clone();
    drop(run);
    let_go(&journal, &*store, url, &session, &owner, &run_id)?;
    let written = written_since(&*store, url, &session, at)?;
    writeln!(
        out,
        "{} call {} of session {} in {}: wrote {} event{} at seq {at}:",
        match answer {
            Answer::Client(_) => "answered",
            Answer::Approval(true) => "approved",
            Answer::Approval(false) => "denied",
        },
        Shown(&call),
        Shown(&session),
        StoreName::of(url),
        written.len(),
        if written.len() == 1 { "" } else { "s" }
    )?;
    write_events(out, at, &written)?;
    writeln!(out, "{tail_note}")?;
    Ok(())
}

/// The saved step's other calls that the plan awaits (client answers, approvals).
fn others_waiting(
    plan: &stepjournal_recovery::Plan,
    _state: &SessionState,
    call: &CallId,
) -> Vec<CallId> {
    plan.calls
        .iter()
        .filter(|c| &c.call != call && c.action == Action::Await)
        .map(|c| c.call.clone())
        .collect()
}

fn list(calls: &[CallId]) -> String {
    calls.iter().map(|c| Shown(c).to_string()).collect::<Vec<_>>().join(", ")
}
