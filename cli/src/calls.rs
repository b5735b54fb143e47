//! `stepjournal calls`: one row per call of a session: its tool, kind, policy, attempts,
//! dispatch id, what became of it, the rule that decided it, and how long ago it last moved.

use std::io::Write;

use clap::Args;
use serde_json::{Value, json};
use stepjournal::writer::{Clock, SystemClock};
use stepjournal_codec::{CallKind, Entry, Event, Operator, Record, Seq, SessionId, UnixMillis};
use stepjournal_recovery::{Action, ApprovalState, CallRecord, Config, Resolution};

use super::CliError;
use super::operator::{operator_json, operator_text};
use super::plan::dry_plan;
use super::reading::{OnDamage, Reading};
use super::sessions::age_text;
use super::shown::Shown;

/// Arguments of `stepjournal calls`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal calls file:./stepjournal-demo SESSION\n  \
stepjournal calls sqlite:journal.db SESSION --json\n\n\
One row per call of every reply, in log order. STATUS is what became of it: `result`, `error` \
(an error result), `answered` (a client's answer), `denied`, `paired REASON`, or, while \
unresolved, `awaiting client`, `awaiting approval`, `in flight` (a body started, no result) or \
`not started`. RULE is the rule that decided it: the one recorded with its pairing, or for an \
unresolved call of the saved step the one a wake would apply now (shown as `wake: RULE`). AGE \
is the time since the call's last event. BY, shown when some call has one, is who resolved \
the call from the command line and why (`stop`, `answer`, `approve`, `deny` with --as and \
--reason).")]
pub struct CallsArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// The session.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// On damage: stop (`fail`), or say that the session is damaged and exit 1 (`skip`).
    #[arg(long, value_enum, default_value_t = OnDamage::Fail, value_name = "MODE")]
    pub on_corruption: OnDamage,
}

/// One call, as `calls` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRow {
    /// The step of the reply holding it.
    pub step: u64,
    /// The call's id.
    pub call: String,
    /// Its tool.
    pub tool: String,
    /// Its kind.
    pub kind: &'static str,
    /// Its saved replay policy.
    pub policy: &'static str,
    /// How many bodies started.
    pub attempts: u32,
    /// Its dispatch id, once minted.
    pub dispatch: Option<String>,
    /// What became of it.
    pub status: String,
    /// The rule that decided it, where one did.
    pub rule: Option<String>,
    /// When its last event was appended.
    pub last_at: UnixMillis,
    /// Who resolved it from outside the runtime, and why: the operator of the run whose batch
    /// resolved it (a stop's `run_ended.by`, an answer's or approval's `run_started.by`).
    pub by: Option<Operator>,
}

/// The rows of every call of the session's log, in log order.
pub fn rows(records: &[Record]) -> Vec<CallRow> {
    let state = crate::store::fold_records(records);
    let plan = dry_plan(&state, state.len(), Entry::Wake, &Config::default());
    let saved = state.saved_step().map(|r| r.seq);
    let mut out = Vec::new();
    for reply in state.replies() {
        for c in state.calls_of(reply) {
            let mut rule = recorded_rule(&c, records);
            if rule.is_none() && !c.is_resolved() && saved == Some(reply.seq) {
                rule = plan
                    .calls
                    .iter()
                    .find(|p| &p.call == c.id() && p.action != Action::Keep)
                    .map(|p| format!("wake: {}", p.rule.id));
            }
            let call = c.call();
            out.push(CallRow {
                step: reply.step.get(),
                call: c.id().to_string(),
                tool: call.tool.to_string(),
                kind: call.kind.as_str(),
                policy: call.replay.as_str(),
                attempts: c.bodies(),
                dispatch: c.dispatch().map(|d| d.to_string()),
                status: status(&c),
                rule,
                last_at: last_at(&c, reply.seq, records),
                by: resolved_at(&c).and_then(|seq| signed_by(seq, records)).cloned(),
            });
        }
    }
    out
}

/// The rule recorded with the pairing that resolves the call (format version 2 records it).
fn recorded_rule(c: &CallRecord<'_>, records: &[Record]) -> Option<String> {
    let Some(Resolution::Paired(p)) = c.resolution() else { return None };
    match crate::store::at_seq(records, p.seq.get()).map(|r| &r.event) {
        Some(Event::Paired(e)) => e.rule.clone(),
        _ => None,
    }
}

/// Where the event that resolved the call is, or, for an approved call, the decision that let
/// it run (its result is the runtime's).
fn resolved_at(c: &CallRecord<'_>) -> Option<Seq> {
    let decided = c.approvals().last().map(|a| a.seq);
    match c.resolution() {
        Some(Resolution::Result(r)) => decided.or(Some(r.seq)),
        Some(Resolution::ClientAnswer(a)) => Some(a.seq),
        Some(Resolution::ApprovalDenied(a)) => Some(a.seq),
        Some(Resolution::Paired(p)) => Some(p.seq),
        None => decided,
    }
}

/// The operator who wrote the event at `seq`: a stop's, when a `run_ended` carrying one follows
/// in the same batch (appended at the same time, no run begun between), else the one the run
/// holding it was begun by.
fn signed_by(seq: Seq, records: &[Record]) -> Option<&Operator> {
    let at = crate::store::at_seq(records, seq.get())?.at;
    let after = records.iter().skip_while(|r| r.seq <= seq).take_while(|r| r.at == at);
    for r in after {
        match &r.event {
            Event::RunEnded(e) if e.by.is_some() => return e.by.as_ref(),
            Event::RunStarted(_) | Event::RunEnded(_) => break,
            _ => {}
        }
    }
    records.iter().take(seq.get() as usize + 1).rev().find_map(|r| match &r.event {
        Event::RunStarted(e) => Some(e.by.as_ref()),
        _ => None,
    })?
}

fn status(c: &CallRecord<'_>) -> String {
    match c.resolution() {
        Some(Resolution::Result(r)) if r.is_error => "error".to_owned(),
        Some(Resolution::Result(_)) => "result".to_owned(),
        Some(Resolution::ClientAnswer(_)) => "answered".to_owned(),
        Some(Resolution::ApprovalDenied(_)) => "denied".to_owned(),
        Some(Resolution::Paired(p)) => format!("paired {}", p.reason.as_str()),
        None => match (c.kind(), c.approval()) {
            (CallKind::Client, _) => "awaiting client".to_owned(),
            (CallKind::Approval, ApprovalState::Undecided) => "awaiting approval".to_owned(),
            _ if c.bodies() > 0 => "in flight".to_owned(),
            _ => "not started".to_owned(),
        },
    }
}

/// When the call's last event (or its reply, if none named it) was appended.
fn last_at(c: &CallRecord<'_>, reply: stepjournal_codec::Seq, records: &[Record]) -> UnixMillis {
    let mut last = reply;
    let mut see = |s: stepjournal_codec::Seq| last = last.max(s);
    c.dispatches().for_each(|d| see(d.seq));
    c.attempts().for_each(|a| see(a.seq));
    c.chunks().for_each(|k| see(k.seq));
    c.results().for_each(|r| see(r.seq));
    c.answers().for_each(|a| see(a.seq));
    c.approvals().for_each(|a| see(a.seq));
    c.children().for_each(|k| see(k.seq));
    c.pairings().for_each(|p| see(p.seq));
    records.get(last.get() as usize).map_or(UnixMillis(0), |r| r.at)
}

impl CallRow {
    /// The row as one JSON object.
    pub fn to_json(&self, now: UnixMillis) -> Value {
        json!({
            "step": self.step,
            "call": self.call,
            "tool": self.tool,
            "kind": self.kind,
            "policy": self.policy,
            "attempts": self.attempts,
            "dispatch": self.dispatch,
            "status": self.status,
            "rule": self.rule,
            "last_at_ms": self.last_at.get(),
            "age_ms": now.get().saturating_sub(self.last_at.get()),
            "by": operator_json(self.by.as_ref()),
        })
    }
}

/// Writes the rows as an aligned table with a header line.
pub fn write_table(rows: &[CallRow], now: UnixMillis, out: &mut dyn Write) -> std::io::Result<()> {
    let header =
        ["STEP", "CALL", "TOOL", "KIND", "POLICY", "ATTEMPTS", "DISPATCH", "STATUS", "RULE", "AGE"];
    let cells: Vec<[String; 10]> = rows
        .iter()
        .map(|r| {
            [
                r.step.to_string(),
                Shown(&r.call).to_string(),
                Shown(&r.tool).to_string(),
                r.kind.to_owned(),
                r.policy.to_owned(),
                r.attempts.to_string(),
                r.dispatch.as_ref().map_or_else(|| "-".to_owned(), |d| Shown(d).to_string()),
                r.status.clone(),
                r.rule.as_ref().map_or_else(|| "-".to_owned(), |d| Shown(d).to_string()),
                age_text(now.get().saturating_sub(r.last_at.get())),
            ]
        })
        .collect();
    // Who resolved a call from the command line: a last column, only when some call has one.
    if rows.iter().any(|r| r.by.is_some()) {
        return write_table_by(rows, header, cells, out);
    }
    let widths = crate::columns::widths(header, &cells);
    let line = |row: [&str; 10]| {
        let mut text = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            // Numbers right-aligned: STEP, ATTEMPTS, AGE.
            if matches!(i, 0 | 5 | 9) {
                text.push_str(&format!("{cell:>w$}  "));
            } else {
                text.push_str(&format!("{cell:<w$}  "));
            }
        }
        text.trim_end().to_owned()
    };
    writeln!(out, "{}", line(header))?;
    for row in &cells {
        let refs: [&str; 10] = std::array::from_fn(|i| row[i].as_str());
        writeln!(out, "{}", line(refs))?;
    }
    Ok(())
}

/// [`write_table`] with a last column, BY: who resolved the call and why.
fn write_table_by(
    rows: &[CallRow],
    header: [&str; 10],
    cells: Vec<[String; 10]>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let header: [&str; 11] = std::array::from_fn(|i| header.get(i).copied().unwrap_or("BY"));
    let cells: Vec<[String; 11]> = cells
        .into_iter()
        .zip(rows)
        .map(|(row, r)| {
            let by = r.by.as_ref().map_or_else(|| "-".to_owned(), operator_text);
            let mut row = row.into_iter();
            std::array::from_fn(|_| row.next().unwrap_or_else(|| by.clone()))
        })
        .collect();
    let widths = crate::columns::widths(header, &cells);
    let line = |row: [&str; 11]| {
        let mut text = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if matches!(i, 0 | 5 | 9) {
                text.push_str(&format!("{cell:>w$}  "));
            } else if i == 10 {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<w$}  "));
            }
        }
        text.trim_end().to_owned()
    };
    writeln!(out, "{}", line(header))?;
    for row in &cells {
        let refs: [&str; 11] = std::array::from_fn(|i| row[i].as_str());
        writeln!(out, "{}", line(refs))?;
    }
    Ok(())
}

/// Runs `stepjournal calls`.
pub fn run(args: &CallsArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut reading = Reading::open(&args.store, args.on_corruption)?;
    let session = SessionId::from_stored(args.session.as_str());
    let records = reading.read_one(&session)?;
    let rows = rows(&records);
    let now = SystemClock.now();
    let mut out = std::io::BufWriter::new(out);
    if args.json {
        for r in &rows {
            writeln!(out, "{}", r.to_json(now))?;
        }
    } else if rows.is_empty() {
        writeln!(out, "session {} has no calls", Shown(&session))?;
    } else {
        write_table(&rows, now, &mut out)?;
    }
    out.flush()?;
    Ok(())
}
