//! `stepjournal sessions`: one line per session: id, events, last append, state, unresolved
//! calls of the saved step.

use std::io::Write;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use stepjournal::writer::{Clock, SystemClock};
use stepjournal_codec::{CallId, Record, RunOutcome, SessionId, StepNo, UnixMillis};
use stepjournal_recovery::SessionState;

use super::CliError;
pub use super::holders::{Held, Holders, LOCK_WATCH, LockHeld};
use super::reading::{Liveness, OnDamage, Reading};
use super::shown::{Shown, StoreName, escape};
use super::time::{checked_rfc3339, parse_since, rfc3339};

/// Arguments of `stepjournal sessions`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal sessions file:./stepjournal-demo\n  \
stepjournal sessions sqlite:journal.db --state crashed --since 2h\n  \
stepjournal sessions postgres://u@db/app --sort age --limit 20\n  \
stepjournal sessions file:./stepjournal-demo --json\n\n\
STATE is how the last run ended (suspended, failed, completed, stopped), or, while it has not \
ended, whether it runs: `running` while a runtime holds it (the run's lease on SQLite and \
PostgreSQL; the directory's lock on a file journal), `crashed` when nothing holds it (a wake \
recovers it). `open` is shown where the store cannot say (a damaged file journal read with \
--on-corruption skip). AGE is the time since the last append. UNRESOLVED lists the saved \
step's calls that have no result, answer, denial or pairing yet.\n\
--since takes a duration before now (90s, 15m, 2h, 7d), a date (2025-01-15, UTC) or an RFC 3339 \
time (2025-01-15T09:00:00Z). --sort age puts the longest idle first; --sort events the largest \
first; --limit keeps the first N rows after sorting.")]
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
    /// The order of the rows (default: by session id).
    #[arg(long, value_enum)]
    pub sort: Option<SortBy>,
    /// At most this many rows (at least 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// On damage: stop (`fail`), or list every intact session and the damaged ones on
    /// standard error, exiting 1 (`skip`).
    #[arg(long, value_enum, default_value_t = OnDamage::Fail, value_name = "MODE")]
    pub on_corruption: OnDamage,
}

/// How `sessions` orders its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortBy {
    /// The longest since its last append first.
    Age,
    /// The most events first.
    Events,
}

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SessionStatus {
    /// The last run has not ended and a runtime holds it (its lease, or the journal's lock).
    Running,
    /// The last run has not ended and nothing holds it: its process died; a wake recovers it.
    Crashed,
    /// The last run has not ended, and the store cannot say whether it runs.
    Open,
    /// The last run has not ended and its lease has lapsed, but another process has held the
    /// database's write lock all the while this command looked (SQLite): it may be that run's
    /// runtime, frozen inside a write transaction, so the store cannot judge the run; a wake
    /// would wait for the lock.
    Locked,
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
    /// Where the folded session stands, an open run shown as `open`.
    pub fn of(state: &SessionState) -> Self {
        Self::of_held(state, Held::Unknown)
    }

    /// Where the folded session stands, an open run told apart by `held`.
    pub fn of_held(state: &SessionState, held: Held) -> Self {
        match state.last_run_outcome() {
            None => match held {
                Held::Yes => SessionStatus::Running,
                Held::No => SessionStatus::Crashed,
                Held::Unknown => SessionStatus::Open,
                Held::Locked => SessionStatus::Locked,
            },
            Some(RunOutcome::Suspended) => SessionStatus::Suspended,
            Some(RunOutcome::Failed) => SessionStatus::Failed,
            Some(RunOutcome::Completed) => SessionStatus::Completed,
            Some(RunOutcome::Stopped) => SessionStatus::Stopped,
        }
    }

    /// The state's name.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Running => "running",
            SessionStatus::Crashed => "crashed",
            SessionStatus::Open => "open",
            SessionStatus::Locked => "locked",
            SessionStatus::Suspended => "suspended",
            SessionStatus::Failed => "failed",
            SessionStatus::Completed => "completed",
            SessionStatus::Stopped => "stopped",
        }
    }
}

/// Why an open run shows as `open` (neither running nor crashed) on a store read so, if it does.
pub fn why_open(live: Liveness) -> Option<&'static str> {
    match live {
        Liveness::Unknown => Some(
            "the journal was read around its damage (--on-corruption skip), so nothing tells a \
             running session from a crashed one",
        ),
        _ => None,
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
    /// How long since the last append, when the summary was made for a listing.
    pub age: Option<u64>,
}

impl SessionSummary {
    /// Sums up a session from its records (in order).
    pub fn of(session: SessionId, records: Vec<Record>) -> Self {
        let events = records.len() as u64;
        let last_append = records.last().map_or(UnixMillis(0), |r| r.at);
        let state = crate::store::fold_records(&records);
        Self::of_state(session, events, last_append, &state)
    }

    /// Sums up a folded session.
    pub fn of_state(
        session: SessionId,
        events: u64,
        last_append: UnixMillis,
        state: &SessionState,
    ) -> Self {
        Self::of_held(session, events, last_append, state, Held::Unknown)
    }

    /// Sums up a folded session whose open run, if any, is `held` or not.
    pub fn of_held(
        session: SessionId,
        events: u64,
        last_append: UnixMillis,
        state: &SessionState,
        held: Held,
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
            status: SessionStatus::of_held(state, held),
            saved_step: saved.map(|r| r.step),
            unresolved,
            age: None,
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
            "age_ms": self.age,
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

/// Sums up every session of the store that the filter keeps, by id; with `now`, each with its
/// age. Also says whether another process held the database's write lock throughout.
pub fn summarize(
    reading: &mut Reading,
    filter: Filter,
    now: Option<UnixMillis>,
) -> Result<(Vec<SessionSummary>, Option<LockHeld>), CliError> {
    let holders = Holders::of(reading)?;
    let mut out = Vec::new();
    for session in reading.sessions()? {
        // `None`: deleted since the listing, or damaged and skipped.
        let Some(records) = reading.read(&session)? else { continue };
        let events = records.len() as u64;
        let last_append = records.last().map_or(UnixMillis(0), |r| r.at);
        let state = crate::store::fold_records(&records);
        let held = holders.held(&session, &state);
        let mut summary = SessionSummary::of_held(session, events, last_append, &state, held);
        summary.age = now.map(|n| n.get().saturating_sub(last_append.get()));
        if filter.keeps(&summary) {
            out.push(summary);
        }
    }
    Ok((out, holders.locked()))
}

/// Orders the summaries and keeps the first `limit`.
pub fn sort_and_limit(
    summaries: &mut Vec<SessionSummary>,
    sort: Option<SortBy>,
    limit: Option<usize>,
) {
    match sort {
        // Stable: equal keys keep the id order.
        Some(SortBy::Age) => summaries.sort_by_key(|s| std::cmp::Reverse(s.age.unwrap_or(0))),
        Some(SortBy::Events) => summaries.sort_by_key(|s| std::cmp::Reverse(s.events)),
        None => {}
    }
    if let Some(n) = limit {
        summaries.truncate(n);
    }
}

/// An age as the table shows it: whole seconds, minutes, hours or days.
pub fn age_text(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// Writes the summaries as an aligned table with a header line.
pub fn write_table(summaries: &[SessionSummary], out: &mut dyn Write) -> std::io::Result<()> {
    let rows: Vec<[String; 6]> = summaries
        .iter()
        .map(|s| {
            [
                Shown(&s.session).to_string(),
                s.events.to_string(),
                rfc3339(s.last_append),
                s.age.map_or_else(|| "-".to_owned(), age_text),
                s.status.as_str().to_owned(),
                s.unresolved_text(),
            ]
        })
        .collect();
    let header = ["SESSION", "EVENTS", "LAST APPEND (UTC)", "AGE", "STATE", "UNRESOLVED"];
    let widths = crate::columns::widths(header, &rows);
    let line = |cells: [&str; 6]| {
        let [id, events, at, age, state, open] = cells;
        let [w0, w1, w2, w3, w4, _] = widths;
        format!("{id:<w0$}  {events:>w1$}  {at:<w2$}  {age:>w3$}  {state:<w4$}  {open}")
    };
    writeln!(out, "{}", line(header).trim_end())?;
    for row in &rows {
        let [a, b, c, d, e, f] = row;
        writeln!(out, "{}", line([a, b, c, d, e, f]).trim_end())?;
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
    let mut reading = Reading::open(&args.store, args.on_corruption)?;
    let now = SystemClock.now();
    let why_open = why_open(reading.live);
    let (mut summaries, locked) =
        summarize(&mut reading, Filter { status: args.state, since }, Some(now))?;
    let limit = args.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    sort_and_limit(&mut summaries, args.sort, limit);
    let mut out = std::io::BufWriter::new(out);
    let any_open = summaries.iter().any(|s| s.status == SessionStatus::Open);
    if args.json {
        for s in &summaries {
            let mut row = s.to_json();
            if let (SessionStatus::Open, Some(why)) = (s.status, why_open) {
                row["open_why"] = Value::String(why.to_owned());
            }
            if let (SessionStatus::Locked, Some(locked)) = (s.status, locked) {
                row["locked_why"] = Value::String(locked.to_string());
                row["lock_holder_pid"] = Value::from(locked.pid);
            }
            writeln!(out, "{row}")?;
        }
    } else if summaries.is_empty() {
        let filtered = args.state.is_some() || since.is_some();
        let what = if filtered { "no session matches" } else { "no sessions" };
        writeln!(out, "{what} in {}", StoreName::of(&args.store))?;
    } else {
        write_table(&summaries, &mut out)?;
        if let (true, Some(why)) = (any_open, why_open) {
            writeln!(out, "open: {why}")?;
        }
        let any_locked = summaries.iter().any(|s| s.status == SessionStatus::Locked);
        if let (true, Some(locked)) = (any_locked, locked) {
            writeln!(out, "locked: {locked}")?;
        }
    }
    out.flush()?;
    reading.finish()
}
