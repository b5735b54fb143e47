//! `stepjournal view`: one session's timeline as one self-contained HTML file (inline CSS and
//! script, nothing fetched), for a person at an incident. First what a `wake` would do to each
//! call and by which rule (the library's recovery plan, `wake`); then the runs as bands (a run
//! with no `run_ended` drawn crashed, running or open as `sessions` says), steps, and one lane
//! per call: its kind, policy and order, an arrow to the call it waits behind, each attempt as a
//! bar from `attempt_started` to its result, output chunks as ticks, pairings coloured by reason,
//! client and approval waits, and beside it its arguments, output and answer; under the lanes
//! the sequence axis and the time axis; then what was said, and the pairings recorded. Each mark
//! shows its event's JSON when clicked (and its summary on hover).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use stepjournal_codec::{Event, Record, SessionId};
use stepjournal_recovery::SessionState;

mod axis;
mod calls;
mod decided;
mod html;
mod lanes;
mod marks;
mod said;
mod wake;

use html::{esc, write_marks};
use marks::{run_marks, runs_of, step_marks};

use super::CliError;
use super::reading::{OnDamage, Reading};
use super::time::rfc3339;
use crate::sessions::{Held, Holders, SessionStatus, SessionSummary};
use crate::shown::Shown;

/// Arguments of `stepjournal view`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  stepjournal view file:./stepjournal-demo SESSION -o session.html\n  \
stepjournal view sqlite:journal.db SESSION -o - > session.html\n\n\
The file is self-contained: open it in any browser, offline. The horizontal axis is the \
session's sequence numbers. Click a mark to see its event's JSON."
)]
pub struct ViewArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// The session.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// The HTML file to write (`-`: standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// On damage: stop (`fail`), or say that the session is damaged and exit 1 (`skip`).
    #[arg(long, value_enum, default_value_t = OnDamage::Fail, value_name = "MODE")]
    pub on_corruption: OnDamage,
}

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// How the log's last run, if it has not ended, is drawn: as `sessions` says of the session.
fn last_open(status: SessionStatus) -> &'static str {
    match status {
        SessionStatus::Running => "running",
        SessionStatus::Crashed => "crash",
        SessionStatus::Locked => "locked",
        _ => "open",
    }
}

/// The whole page for the session's records (in order) and `state`, their fold, its open run
/// told running or crashed by `held` (as `sessions` tells it).
pub fn page(session: &SessionId, records: &[Record], state: &SessionState, held: Held) -> String {
    let n = (records.len() as u64).max(1);
    let at = |r: Option<&Record>| r.map(|r| r.at);
    let summary = at(records.last()).map(|last| {
        SessionSummary::of_held(session.clone(), records.len() as u64, last, state, held)
    });
    let status = summary.as_ref().map_or(SessionStatus::Open, |s| s.status);
    let runs = runs_of(records, last_open(status));
    let plan = wake::wake_plan(state, records.len() as u64);
    let lanes = lanes::lanes(records, &runs, state, &plan);
    let mut html = String::new();
    let title = format!("stepjournal: session {session}");
    html.push_str(&format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head><body>",
        esc(&title)
    ));
    write_header(&mut html, session, records, state, status, runs.len(), lanes.count());
    html.push_str("<main>");
    wake::write_wake(&mut html, &plan, state, status);
    html.push_str(&format!(
        "<section class=\"timeline-section\"><h2>timeline</h2><div class=\"timeline\" \
         style=\"--gutter:{}px\">",
        lanes.gutter_px()
    ));
    html.push_str(
        "<div class=\"row head\"><div class=\"order\"></div><div class=\"label\">call, kind, \
         policy, order; what a wake would do</div><div class=\"track\">events by seq</div>\
         <div class=\"facts\">arguments, output, answer</div></div>",
    );
    html.push_str(
        "<div class=\"row runs\"><div class=\"order\"></div><div class=\"label\">runs</div>\
         <div class=\"track\">",
    );
    write_marks(&mut html, &run_marks(records, &runs), n, records, &[]);
    html.push_str("</div><div class=\"facts\"></div></div>");
    html.push_str(
        "<div class=\"row steps\"><div class=\"order\"></div><div class=\"label\">steps</div>\
         <div class=\"track\">",
    );
    write_marks(&mut html, &step_marks(records), n, records, &[]);
    html.push_str("</div><div class=\"facts\"></div></div>");
    lanes.write(&mut html, n, records);
    axis::write_seq_axis(&mut html, n);
    axis::write_time_axis(&mut html, records);
    html.push_str("</div></section>");
    said::write_said(&mut html, state, status);
    write_decisions(&mut html, records);
    html.push_str(LEGEND);
    html.push_str(
        "<section class=\"details\"><h2>event</h2><pre id=\"details\">click a mark</pre></section>",
    );
    html.push_str(&format!("</main><script>{SCRIPT}</script></body></html>\n"));
    html
}

fn write_header(
    html: &mut String,
    session: &SessionId,
    records: &[Record],
    state: &SessionState,
    status: SessionStatus,
    runs: usize,
    calls: usize,
) {
    let first = records.first().map(|r| rfc3339(r.at)).unwrap_or_default();
    let lastat = records.last().map(|r| rfc3339(r.at)).unwrap_or_default();
    let unresolved = state
        .saved_step()
        .map(|reply| state.calls_of(reply).iter().filter(|c| !c.is_resolved()).count())
        .unwrap_or(0);
    html.push_str(&format!(
        "<header data-state=\"{}\"><h1>session <code>{}</code> <span class=\"state \
         state-{}\">{}</span></h1><p>{} events, {runs} runs, {calls} calls, {unresolved} \
         unresolved; from {} to {} (UTC). The horizontal axis is the log's sequence numbers, \
         the time of each labelled event under it. Click a mark for its event.</p></header>",
        status.as_str(),
        esc(session.as_str()),
        status.as_str(),
        status.as_str(),
        records.len(),
        esc(&first),
        esc(&lastat)
    ));
}

/// The recovery decisions: every pairing, with its reason, its rule and the model's message.
fn write_decisions(html: &mut String, records: &[Record]) {
    html.push_str(
        "<section class=\"decisions\"><h2>pairings recorded</h2><table><tr><th>seq</th><th>call</th>\
         <th>reason</th><th>rule</th><th>message</th></tr>",
    );
    for r in records {
        if let Event::Paired(e) = &r.event {
            html.push_str(&format!(
                "<tr class=\"decision reason-{}\" data-call=\"{}\" data-rule=\"{}\"><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                e.reason.as_str(),
                esc(e.call.as_str()),
                esc(e.rule.as_deref().unwrap_or("")),
                r.seq,
                esc(e.call.as_str()),
                e.reason.as_str(),
                esc(e.rule.as_deref().unwrap_or("(not recorded)")),
                esc(&e.message)
            ));
        }
    }
    if !records.iter().any(|r| matches!(r.event, Event::Paired(_))) {
        html.push_str("<tr class=\"none\"><td colspan=\"5\">no pairing recorded</td></tr>");
    }
    html.push_str("</table></section>");
}

const LEGEND: &str = "<section class=\"legend\"><h2>legend</h2>\
<span class=\"key run outcome-completed\">run completed</span>\
<span class=\"key run outcome-crash\">run crashed (no run_ended, nothing holds it)</span>\
<span class=\"key run outcome-running\">run running (a runtime holds it)</span>\
<span class=\"key run outcome-open\">run open (the store cannot say)</span>\
<span class=\"key run outcome-locked\">run locked (lease lapsed, another process holds the \
database's write lock)</span>\
<span class=\"key attempt ok\">attempt with result</span>\
<span class=\"key attempt cut\">attempt cut off</span>\
<span class=\"key wait-key\">waiting for client / approval</span>\
<span class=\"key reason-outcome_unknown\">outcome_unknown</span>\
<span class=\"key reason-not_started\">not_started</span>\
<span class=\"key reason-replay_limit_reached\">replay_limit_reached</span>\
<span class=\"key reason-run_stopped\">run_stopped</span>\
<span class=\"key arrow-key\">&#8594; a call waits behind the call the arrow points to (group or \
sequential chain)</span></section>";

/// Runs `stepjournal view`.
pub fn run(args: &ViewArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut reading = Reading::open(&args.store, args.on_corruption)?;
    let session = SessionId::from_stored(args.session.as_str());
    let records = reading.read_one(&session)?;
    let holders = Holders::of_one(&reading, &session)?;
    let state = crate::store::fold_records(&records);
    let html = page(&session, &records, &state, holders.held(&session, &state));
    if args.output.as_os_str() == "-" {
        out.write_all(html.as_bytes())?;
        return Ok(());
    }
    std::fs::write(&args.output, html)
        .map_err(|source| CliError::WriteFile { path: args.output.clone(), source })?;
    writeln!(
        out,
        "wrote {} ({} events of session {})",
        Shown(args.output.display()),
        records.len(),
        Shown(&session)
    )?;
    Ok(())
}
