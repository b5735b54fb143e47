//! `stepjournal stop`: stops a session's work through the session writer: its unresolved calls
//! are paired `run_stopped`, the step is closed and `run_ended stopped` names the running run,
//! which fences it wherever it runs.

use std::io::Write;

use clap::Args;
use stepjournal_codec::{Entry, RunOutcome, SessionId};
use stepjournal_recovery::{Config, SessionState};

use super::CliError;
use super::act::{journal, open_to_write, read_state, write_events, written_since};
use super::operator::{OperatorArgs, operator_text};
use super::plan::{StorePlan, dry_plan, explain};
use super::shown::{Shown, StoreName};

/// Arguments of `stepjournal stop`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal stop sqlite:journal.db SESSION --dry-run\n  \
stepjournal stop postgres://u@db/app SESSION\n\n\
Writes through the session writer, as the runtime API's `Journal::stop` does: the saved step's \
unresolved calls are paired `run_stopped` (rule stop.run_stopped), the step is closed, and \
`run_ended stopped` names the running run; it records who stopped it and why (--as, default \
$STEPJOURNAL_OPERATOR, $USER or $LOGNAME; --reason). On SQLite and PostgreSQL this works beside a live \
runtime: its run is fenced (its next append is refused). A file journal has one writer: while \
a runtime holds its lock, stop through the runtime. --dry-run prints the plan and the events \
it would write, and writes nothing. A session whose last run completed, failed or was stopped \
has nothing to stop: the command says so and writes nothing (exit 0).")]
pub struct StopArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// The session.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// Print what would be written; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Who stops it, and why (`--as`, `--reason`): recorded on the `run_ended`.
    #[command(flatten)]
    pub by: OperatorArgs,
}

/// How the session's last run ended, when nothing is left to stop: it completed, failed or was
/// stopped (a suspended session is stopped: its waiting calls are paired `run_stopped`).
fn nothing_to_stop(state: &SessionState) -> Option<RunOutcome> {
    state.last_run_outcome().filter(|o| *o != RunOutcome::Suspended)
}

fn said_nothing_to_stop(
    out: &mut dyn Write,
    url: &str,
    session: &SessionId,
    outcome: RunOutcome,
) -> Result<(), CliError> {
    writeln!(
        out,
        "session {} of {}: its last run ended {}: nothing to stop; nothing was written",
        Shown(session),
        StoreName::of(url),
        outcome.as_str()
    )?;
    Ok(())
}

/// After a dry run's plan: says so when the session is running, since the stop would fence that
/// run (on a file journal whose lock a runtime holds, the stop would be refused instead).
fn said_who_runs_it(
    out: &mut dyn Write,
    store: &dyn stepjournal_backends::JournalStore,
    url: &str,
    session: &SessionId,
) -> Result<(), CliError> {
    if let Ok(stepjournal_backends::StoreUrl::File(dir)) =
        stepjournal_backends::StoreUrl::parse(url)
        && stepjournal_backends::file::writer_is_live(&dir).unwrap_or(false)
    {
        writeln!(
            out,
            "note: a runtime holds the journal's lock: this stop would be refused; stop the \
             session through the runtime (Journal::stop)"
        )?;
        return Ok(());
    }
    let head = store.head(session).map_err(|source| CliError::Store {
        url: StoreName::of(url),
        doing: format!("reading the head of {}", Shown(session)),
        source,
    })?;
    // Live by the store's clock, read with the head: never by this command's.
    if let Some(lease) = head.as_ref().and_then(|h| h.live_lease()) {
        writeln!(
            out,
            "note: session `{}` is running (owner {} holds its live lease): this stop would \
             fence that run, its next append refused",
            Shown(session),
            Shown(&lease.owner)
        )?;
    }
    Ok(())
}

/// Runs `stepjournal stop`.
pub fn run(args: &StopArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let session = SessionId::from_stored(args.session.as_str());
    let by = args.by.operator()?;
    if args.dry_run {
        let reading = super::store::open_read(&args.store)?;
        let (records, state) = read_state(&*reading, &args.store, &session)?;
        if let Some(outcome) = nothing_to_stop(&state) {
            return said_nothing_to_stop(out, &args.store, &session, outcome);
        }
        let plan = dry_plan(&state, records.len() as u64, Entry::Stop, &Config::default());
        let request = StorePlan {
            url: &args.store,
            session: &session,
            entry: Entry::Stop,
            tools: None,
            config: Config::default(),
            on_corruption: Default::default(),
        };
        explain(&request, &plan, &state, out)?;
        if let Some(by) = &by {
            writeln!(out, "the run_ended would record who and why: {}", operator_text(by))?;
        }
        return said_who_runs_it(out, &*reading, &args.store, &session);
    }
    let store = open_to_write(&args.store, "stop")?;
    let (_, state) = read_state(&*store, &args.store, &session)?;
    if let Some(outcome) = nothing_to_stop(&state) {
        return said_nothing_to_stop(out, &args.store, &session, outcome);
    }
    let (journal, owner) =
        journal(std::sync::Arc::clone(&store), &state, by).map_err(|source| CliError::Action {
            url: StoreName::of(&args.store),
            session: session.clone(),
            what: "stop",
            source: Box::new(source.into()),
        })?;
    let run = match journal.begin_run(&session, Entry::Stop) {
        Ok(run) => run,
        // The run ended between the read above and the stop's append: the writer wrote
        // nothing rather than end it twice.
        Err(stepjournal::BeginError::NothingToStop { outcome, .. }) => {
            return said_nothing_to_stop(out, &args.store, &session, outcome);
        }
        Err(source) => {
            return Err(CliError::Action {
                url: StoreName::of(&args.store),
                session: session.clone(),
                what: "stop",
                source: Box::new(source.into()),
            });
        }
    };
    let at = run.begun_at().get();
    let run_id = run.id().clone();
    drop(run);
    super::act::let_go(&journal, &*store, &args.store, &session, &owner, &run_id)?;
    let written = written_since(&*store, &args.store, &session, at)?;
    writeln!(
        out,
        "stopped session {} of {}: wrote {} event{} at seq {at}:",
        Shown(&session),
        StoreName::of(&args.store),
        written.len(),
        if written.len() == 1 { "" } else { "s" }
    )?;
    write_events(out, at, &written)?;
    Ok(())
}
