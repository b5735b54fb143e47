//! `stepjournal sessions`: one line per session: id, events, last append, state, unresolved
//! calls of the saved step.

use std::io::Write;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use stepjournal::writer::{Clock, SystemClock};
use stepjournal_backends::JournalStore;
use stepjournal_codec::{CallId, Record, RunOutcome, SessionId, StepNo, UnixMillis};
use stepjournal_recovery::{SessionState, fold_owned};

use super::CliError;
use super::shown::{Shown, StoreName, escape};
use super::store::{list_sessions, open_read};
use super::time::{checked_rfc3339, parse_since, rfc3339};

/// Arguments of `stepjournal sessions`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal sessions file:./stepjournal-demo\n  \
stepjournal sessions sqlite:journal.db --state open --since 2h\n  \
stepjournal sessions file:./stepjournal-demo --json\n\n\
STATE is `open` while the last run has not ended (running, or lost in a crash: a wake recovers \
it), else how the last run ended: suspended, failed, completed or stopped. UNRESOLVED lists the \
saved step's calls that have no result, answer, denial or pairing yet.\n\
--since takes a duration before now (90s, 15m, 2h, 7d), a date (2025-01-15, UTC) or an RFC 3339 \
time (2025-01-15T09:00:00Z).")]
pub struct SessionsArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// Only sessions in this state.
    #[arg(long, value_enum)]
    pub state: Option<SessionStatus>,
    /// Only sessions appended to at or after this time.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SessionStatus {
    /// No `run_ended` after the last `run_started`: running, or lost in a crash.
    Open,
    /// The last run suspended, waiting for client or approval answers.
    Suspended,
    /// The last run failed.
    Failed,
    /// The last run completed.
    Completed,
    /// The last run was stopped.
    Stopped,
}

impl SessionStatus {
    /// Where the folded session stands.
    pub fn of(state: &SessionState) -> Self {
        match state.last_run_outcome() {
            None => SessionStatus::Open,
            Some(RunOutcome::Suspended) => SessionStatus::Suspended,
            Some(RunOutcome::Failed) => SessionStatus::Failed,
            Some(RunOutcome::Completed) => SessionStatus::Completed,
            Some(RunOutcome::Stopped) => SessionStatus::Stopped,
        }
    }

    /// The state's name.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Open => "open",
            SessionStatus::Suspended => "suspended",
            SessionStatus::Failed => "failed",
            SessionStatus::Completed => "completed",
            SessionStatus::Stopped => "stopped",
        }
    }
}

/// One session, summed up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session.
    pub session: SessionId,
    /// Its number of events.
    pub events: u64,
    /// When its last event was appended.
    pub last_append: UnixMillis,
    /// Where it stands.
    pub status: SessionStatus,
    /// The saved step (the last reply's step when it has no `step_commit`).
    pub saved_step: Option<StepNo>,
    /// The saved step's calls that are not resolved, in reply order.
    pub unresolved: Vec<CallId>,
}

impl SessionSummary {
    /// Sums up a session from its records (in order).
    pub fn of(session: SessionId, records: Vec<Record>) -> Self {
        let events = records.len() as u64;
        let last_append = records.last().map_or(UnixMillis(0), |r| r.at);
        let state = fold_owned(records.into_iter().map(|r| r.event).collect());
        Self::of_state(session, events, last_append, &state)
    }

    /// Sums up a folded session.
    pub fn of_state(
        session: SessionId,
        events: u64,
        last_append: UnixMillis,
        state: &SessionState,
    ) -> Self {
        let saved = state.saved_step();
        let unresolved = saved
            .map(|reply| {
                state
                    .calls_of(reply)
                    .iter()
                    .filter(|c| !c.is_resolved())
                    .map(|c| c.id().clone())
                    .collect()
            })
            .unwrap_or_default();
        SessionSummary {
            session,
            events,
            last_append,
            status: SessionStatus::of(state),
            saved_step: saved.map(|r| r.step),
            unresolved,
        }
    }

    /// The summary as one JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "session": self.session.as_str(),
            "events": self.events,
            // `null` for a stored time past the year 9999; the number stays exact.
            "last_append": checked_rfc3339(self.last_append),
            "last_append_ms": self.last_append.get(),
            "state": self.status.as_str(),
            "saved_step": self.saved_step.map(StepNo::get),
            "unresolved": self.unresolved.iter().map(CallId::as_str).collect::<Vec<_>>(),
        })
    }

    fn unresolved_text(&self) -> String {
        match (self.saved_step, self.unresolved.is_empty()) {
            (Some(step), false) => {
                let ids: Vec<String> = self.unresolved.iter().map(|c| escape(c.as_str())).collect();
                format!("{} (step {step}: {})", ids.len(), ids.join(", "))
            }
            _ => "-".to_owned(),
        }
    }
}

/// Which sessions to list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only this state.
    pub status: Option<SessionStatus>,
    /// Only sessions appended to at or after this time.
    pub since: Option<UnixMillis>,
}

impl Filter {
    fn keeps(&self, s: &SessionSummary) -> bool {
        self.status.is_none_or(|st| st == s.status) && self.since.is_none_or(|t| s.last_append >= t)
    }
}

/// Sums up every session of the store that the filter keeps, by id.
pub fn summarize(
    store: &dyn JournalStore,
    url: &str,
    filter: Filter,
) -> Result<Vec<SessionSummary>, CliError> {
    let mut out = Vec::new();
    for session in list_sessions(store, url)? {
        let records = store.read_all(&session).map_err(|source| CliError::Store {
            url: StoreName::of(url),
            doing: format!("reading session {session}"),
            source,
        })?;
        // Deleted since the listing.
        if records.is_empty() {
            continue;
        }
        let summary = SessionSummary::of(session, records);
        if filter.keeps(&summary) {
            out.push(summary);
        }
    }
    Ok(out)
}

/// Writes the summaries as an aligned table with a header line.
pub fn write_table(summaries: &[SessionSummary], out: &mut dyn Write) -> std::io::Result<()> {
    let rows: Vec<[String; 5]> = summaries
        .iter()
        .map(|s| {
            [
                Shown(&s.session).to_string(),
                s.events.to_string(),
                rfc3339(s.last_append),
                s.status.as_str().to_owned(),
                s.unresolved_text(),
            ]
        })
        .collect();
    let header = ["SESSION", "EVENTS", "LAST APPEND (UTC)", "STATE", "UNRESOLVED"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 5]| {
        let [id, events, at, state, open] = cells;
        let [w0, w1, w2, w3, _] = widths;
        format!("{id:<w0$}  {events:>w1$}  {at:<w2$}  {state:<w3$}  {open}")
    };
    writeln!(out, "{}", line(header).trim_end())?;
    for row in &rows {
        let [a, b, c, d, e] = row;
        writeln!(out, "{}", line([a, b, c, d, e]).trim_end())?;
    }
    Ok(())
}

/// Runs `stepjournal sessions`.
pub fn run(args: &SessionsArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let since = args
        .since
        .as_deref()
        .map(|t| parse_since(t, SystemClock.now()))
        .transpose()
        .map_err(|reason| CliError::Usage { option: "--since", reason })?;
    let store = open_read(&args.store)?;
    let summaries = summarize(&*store, &args.store, Filter { status: args.state, since })?;
    let mut out = std::io::BufWriter::new(out);
    if args.json {
        for s in &summaries {
            writeln!(out, "{}", s.to_json())?;
        }
    } else if summaries.is_empty() {
        let filtered = args.state.is_some() || since.is_some();
        let what = if filtered { "no session matches" } else { "no sessions" };
        writeln!(out, "{what} in {}", StoreName::of(&args.store))?;
    } else {
        write_table(&summaries, &mut out)?;
    }
    out.flush()?;
    Ok(())
}
