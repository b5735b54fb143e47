//! `stepjournal view`: one session's timeline as one self-contained HTML file (inline CSS and
//! script, nothing fetched): runs as bands (a run that ended without `run_ended` drawn as a
//! crash), steps, one lane per call with each attempt as a bar from `attempt_started` to its
//! result, output chunks as ticks, pairings coloured by reason with their rule and message,
//! client and approval waits, and the recovery decisions; each mark shows its event's JSON
//! when clicked (and its summary on hover).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use stepjournal_codec::json::record_to_export_line;
use stepjournal_codec::{CallId, CallKind, Event, Record, SessionId};

use super::CliError;
use super::reading::{OnCorruption, Reading};
use super::time::rfc3339;

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
    #[arg(long, value_enum, default_value_t = OnCorruption::Fail, value_name = "MODE")]
    pub on_corruption: OnCorruption,
}

/// Text for HTML (element content and quoted attribute values alike).
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' => out.push_str(&format!("&#{};", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// A run as drawn: where it begins and ends, and how it ended.
struct RunBand {
    id: String,
    entry: String,
    start: u64,
    end: u64,
    /// `completed`, `failed`, `stopped`, `suspended`, `crash` (another run began with no
    /// `run_ended` for this one) or `open` (the log's last run, not ended).
    outcome: String,
}

/// One mark in a row: a bar (`end` > `start` or a bar class) or a tick.
struct Mark {
    /// Text drawn inside a bar.
    text: String,
    class: String,
    start: u64,
    end: u64,
    title: String,
    /// The seq whose event the mark shows.
    seq: u64,
    attrs: Vec<(&'static str, String)>,
}

/// A call's lane.
struct Lane {
    call: String,
    tool: String,
    kind: CallKind,
    step: u64,
    reply: u64,
    marks: Vec<Mark>,
    /// The open attempts: attempt number to its mark's index.
    open: HashMap<u32, usize>,
    settled: Option<u64>,
}

fn runs_of(records: &[Record]) -> Vec<RunBand> {
    let last = records.len().saturating_sub(1) as u64;
    let mut runs: Vec<RunBand> = Vec::new();
    let mut open: Option<RunBand> = None;
    for r in records {
        match &r.event {
            Event::RunStarted(e) => {
                if let Some(mut run) = open.take() {
                    run.end = r.seq.get().saturating_sub(1).max(run.start);
                    run.outcome = "crash".to_owned();
                    runs.push(run);
                }
                open = Some(RunBand {
                    id: e.run.to_string(),
                    entry: serde_json::to_string(&e.entry).unwrap_or_default(),
                    start: r.seq.get(),
                    end: last,
                    outcome: "open".to_owned(),
                });
            }
            Event::RunEnded(e) => {
                let mut run = open.take().unwrap_or_else(|| RunBand {
                    id: e.run.to_string(),
                    entry: "(a stop)".to_owned(),
                    start: r.seq.get(),
                    end: r.seq.get(),
                    outcome: String::new(),
                });
                run.end = r.seq.get();
                run.outcome = e.outcome.as_str().to_owned();
                runs.push(run);
            }
            _ => {}
        }
    }
    runs.extend(open);
    runs
}

/// Where the run holding `seq` stops: its `run_ended`, or where it crashed.
fn run_end(runs: &[RunBand], seq: u64) -> u64 {
    runs.iter().find(|r| r.start <= seq && seq <= r.end).map_or(seq, |r| r.end)
}

fn lanes_of(records: &[Record], runs: &[RunBand]) -> Vec<Lane> {
    let last = records.len().saturating_sub(1) as u64;
    let mut lanes: Vec<Lane> = Vec::new();
    let mut current: HashMap<CallId, usize> = HashMap::new();
    for r in records {
        let seq = r.seq.get();
        let tick = |class: &str, title: String| Mark {
            text: String::new(),
            class: class.to_owned(),
            start: seq,
            end: seq,
            title,
            seq,
            attrs: Vec::new(),
        };
        let lane_of = |call: &CallId, current: &HashMap<CallId, usize>| current.get(call).copied();
        match &r.event {
            Event::ReplyCommitted(e) => {
                for c in &e.calls {
                    current.insert(c.call.clone(), lanes.len());
                    let mut lane = Lane {
                        call: c.call.to_string(),
                        tool: c.tool.to_string(),
                        kind: c.kind,
                        step: e.step.get(),
                        reply: seq,
                        marks: Vec::new(),
                        open: HashMap::new(),
                        settled: None,
                    };
                    if matches!(c.kind, CallKind::Client | CallKind::Approval) {
                        let what = if c.kind == CallKind::Client { "client" } else { "approval" };
                        lane.marks.push(Mark {
                            text: format!("waiting for the {what}"),
                            class: format!("wait wait-{what}"),
                            start: seq,
                            end: last,
                            title: format!("waiting for the {what}"),
                            seq,
                            attrs: Vec::new(),
                        });
                    }
                    lanes.push(lane);
                }
            }
            Event::DispatchMinted(e) => {
                if let Some(i) = lane_of(&e.call, &current) {
                    lanes[i].marks.push(tick("dispatch", format!("dispatch {}", e.dispatch)));
                }
            }
            Event::AttemptStarted(e) => {
                if let Some(i) = lane_of(&e.call, &current) {
                    let end = run_end(runs, seq);
                    let lane = &mut lanes[i];
                    lane.open.insert(e.attempt.get(), lane.marks.len());
                    lane.marks.push(Mark {
                        text: format!("#{}", e.attempt),
                        class: "attempt cut".to_owned(),
                        start: seq,
                        end,
                        title: format!("attempt {}: no result (cut off)", e.attempt),
                        seq,
                        attrs: vec![("data-attempt", e.attempt.to_string())],
                    });
                }
            }
            Event::OutputChunk(e) => {
                if let Some(i) = lane_of(&e.call, &current) {
                    let text: String = e.text.chars().take(120).collect();
                    lanes[i]
                        .marks
                        .push(tick("chunk", format!("output of attempt {}: {text}", e.attempt)));
                }
            }
            Event::ToolResult(e) => {
                if let Some(i) = lane_of(&e.call, &current) {
                    let lane = &mut lanes[i];
                    if let Some(&m) = lane.open.get(&e.attempt.get()) {
                        let mark = &mut lane.marks[m];
                        mark.end = seq;
                        mark.class =
                            if e.is_error { "attempt error" } else { "attempt ok" }.to_owned();
                        mark.title = format!(
                            "attempt {}: {} at seq {seq}",
                            e.attempt,
                            if e.is_error { "error result" } else { "result" }
                        );
                    }
                    lane.marks.push(tick("result", format!("result of attempt {}", e.attempt)));
                    lane.settled.get_or_insert(seq);
                }
            }
            Event::ClientAnswer(e) => {
                if let Some(i) = lane_of(&e.call, &current) {
                    lanes[i].marks.push(tick("answer", "the client's answer".to_owned()));
                    lanes[i].settled.get_or_insert(seq);
                }
            }
            Event::ApprovalDecided(e) => {
                if let Some(i) = lane_of(&e.call, &current) {
                    let what = if e.approved { "approved" } else { "denied" };
                    lanes[i].marks.push(tick(&format!("decision {what}"), what.to_owned()));
                    lanes[i].settled.get_or_insert(seq);
                }
            }
            Event::ChildAttached(e) => {
                if let Some(i) = lane_of(&e.call, &current) {
                    lanes[i].marks.push(tick("child", format!("child session {}", e.child)));
                }
            }
            Event::Paired(e) => {
                if let Some(i) = lane_of(&e.call, &current) {
                    let rule = e.rule.clone().unwrap_or_default();
                    let mut title = format!("paired {}", e.reason.as_str());
                    if !rule.is_empty() {
                        title.push_str(&format!(" by rule {rule}"));
                    }
                    if !e.message.is_empty() {
                        title.push_str(&format!(": {}", e.message));
                    }
                    let mut mark = tick(&format!("pairing reason-{}", e.reason.as_str()), title);
                    mark.attrs.push(("data-reason", e.reason.as_str().to_owned()));
                    mark.attrs.push(("data-rule", rule));
                    mark.attrs.push(("data-message", e.message.clone()));
                    lanes[i].marks.push(mark);
                    lanes[i].settled.get_or_insert(seq);
                }
            }
            _ => {}
        }
    }
    // A wait lasts until the call's answer, decision or pairing.
    for lane in &mut lanes {
        let settled = lane.settled;
        if let Some(wait) = lane.marks.iter_mut().find(|m| m.class.starts_with("wait")) {
            wait.end = settled.unwrap_or(last);
        }
    }
    lanes
}

/// The marks of the runs row: a band per run, its entry's events as ticks.
fn run_marks(records: &[Record], runs: &[RunBand]) -> Vec<Mark> {
    let mut marks: Vec<Mark> = runs
        .iter()
        .map(|r| Mark {
            text: format!(
                "{} {}",
                r.id,
                if r.outcome == "crash" { "CRASHED (no run_ended)" } else { r.outcome.as_str() }
            ),
            class: format!("run outcome-{}", r.outcome),
            start: r.start,
            end: r.end,
            title: format!("run {} ({}): {}", r.id, r.entry, r.outcome),
            seq: r.start,
            attrs: vec![("data-run", r.id.clone()), ("data-outcome", r.outcome.clone())],
        })
        .collect();
    for r in records {
        let seq = r.seq.get();
        let (class, title) = match &r.event {
            Event::Message(_) => ("message", "a message".to_owned()),
            Event::Rewound(e) => ("rewound", format!("rewound to checkpoint {}", e.to)),
            Event::Suspended(e) => ("suspended", format!("suspended on {} calls", e.calls.len())),
            Event::ModelAborted(_) => ("aborted", "the model's reply was aborted".to_owned()),
            _ => continue,
        };
        marks.push(Mark {
            text: String::new(),
            class: class.to_owned(),
            start: seq,
            end: seq,
            title,
            seq,
            attrs: Vec::new(),
        });
    }
    marks
}

fn step_marks(records: &[Record]) -> Vec<Mark> {
    let last = records.len().saturating_sub(1) as u64;
    let mut marks: Vec<Mark> = Vec::new();
    let mut open: HashMap<u64, usize> = HashMap::new();
    for r in records {
        let seq = r.seq.get();
        match &r.event {
            Event::ReplyCommitted(e) => {
                open.insert(e.step.get(), marks.len());
                marks.push(Mark {
                    text: format!("step {}", e.step),
                    class: "step open".to_owned(),
                    start: seq,
                    end: last,
                    title: format!("step {}: {} calls, not committed", e.step, e.calls.len()),
                    seq,
                    attrs: vec![("data-step", e.step.to_string())],
                });
            }
            Event::StepCommit(e) => {
                if let Some(&i) = open.get(&e.step.get()) {
                    marks[i].end = seq;
                    marks[i].class = "step committed".to_owned();
                    marks[i].title = format!("step {}: committed at seq {seq}", e.step);
                }
            }
            _ => {}
        }
    }
    marks
}

fn write_marks(
    html: &mut String,
    marks: &[Mark],
    n: u64,
    records: &[Record],
    extra: &[(&'static str, String)],
) {
    let pct = |x: u64| x as f64 * 100.0 / n as f64;
    for m in marks {
        let json = records.get(m.seq as usize).map(record_to_export_line).unwrap_or_default();
        let is_bar = m.end > m.start
            || ["run", "step", "attempt", "wait"].iter().any(|c| m.class.starts_with(c));
        let style = if is_bar {
            format!("left:{:.3}%;width:{:.3}%", pct(m.start), pct(m.end + 1 - m.start))
        } else {
            format!("left:{:.3}%", pct(m.start) + 50.0 / n as f64)
        };
        html.push_str(&format!(
            "<div class=\"mark {} {}\" style=\"{style}\" title=\"{}\" data-seq=\"{}\" data-json=\"{}\"",
            if is_bar { "bar" } else { "tick" },
            esc(&m.class),
            esc(&format!("seq {}: {}", m.seq, m.title)),
            m.seq,
            esc(&json)
        ));
        for (k, v) in extra.iter().chain(&m.attrs) {
            html.push_str(&format!(" {k}=\"{}\"", esc(v)));
        }
        html.push_str(&format!(">{}</div>", esc(&m.text)));
    }
}

/// A row of seq numbers under the lanes, about every tenth of the axis.
fn write_axis(html: &mut String, n: u64) {
    html.push_str("<div class=\"row axis\"><div class=\"label\">seq</div><div class=\"track\">");
    let every = (n / 10).max(1);
    let mut seq = 0;
    while seq < n {
        let left = (seq as f64 + 0.5) * 100.0 / n as f64;
        html.push_str(&format!("<span class=\"axis-tick\" style=\"left:{left:.3}%\">{seq}</span>"));
        seq += every;
    }
    html.push_str("</div></div>");
}

const STYLE: &str = include_str!("view.css");
const SCRIPT: &str = include_str!("view.js");

/// The whole page for the session's records (in order).
pub fn page(session: &SessionId, records: &[Record]) -> String {
    let n = (records.len() as u64).max(1);
    let runs = runs_of(records);
    let lanes = lanes_of(records, &runs);
    let mut html = String::new();
    let title = format!("stepjournal: session {session}");
    html.push_str(&format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head><body>",
        esc(&title)
    ));
    let first = records.first().map(|r| rfc3339(r.at)).unwrap_or_default();
    let lastat = records.last().map(|r| rfc3339(r.at)).unwrap_or_default();
    html.push_str(&format!(
        "<header><h1>session <code>{}</code></h1><p>{} events, {} runs, {} calls; from {} to {} \
         (UTC). The axis is the log's sequence numbers. Click a mark for its event.</p></header>",
        esc(session.as_str()),
        records.len(),
        runs.len(),
        lanes.len(),
        esc(&first),
        esc(&lastat)
    ));
    html.push_str("<main><div class=\"timeline\">");
    html.push_str("<div class=\"row runs\"><div class=\"label\">runs</div><div class=\"track\">");
    write_marks(&mut html, &run_marks(records, &runs), n, records, &[]);
    html.push_str("</div></div>");
    html.push_str("<div class=\"row steps\"><div class=\"label\">steps</div><div class=\"track\">");
    write_marks(&mut html, &step_marks(records), n, records, &[]);
    html.push_str("</div></div>");
    for lane in &lanes {
        html.push_str(&format!(
            "<div class=\"row lane\" data-call=\"{}\" data-tool=\"{}\" data-step=\"{}\" \
             data-kind=\"{}\"><div class=\"label\" title=\"reply at seq {}\"><b>{}</b> {} \
             <small>{}</small></div><div class=\"track\">",
            esc(&lane.call),
            esc(&lane.tool),
            lane.step,
            lane.kind.as_str(),
            lane.reply,
            esc(&lane.call),
            esc(&lane.tool),
            lane.kind.as_str()
        ));
        write_marks(&mut html, &lane.marks, n, records, &[("data-call", lane.call.clone())]);
        html.push_str("</div></div>");
    }
    write_axis(&mut html, n);
    html.push_str("</div>");
    write_decisions(&mut html, records);
    html.push_str(LEGEND);
    html.push_str(
        "<section class=\"details\"><h2>event</h2><pre id=\"details\">click a mark</pre></section>",
    );
    html.push_str(&format!("</main><script>{SCRIPT}</script></body></html>\n"));
    html
}

/// The recovery decisions: every pairing, with its reason, its rule and the model's message.
fn write_decisions(html: &mut String, records: &[Record]) {
    html.push_str(
        "<section class=\"decisions\"><h2>decisions</h2><table><tr><th>seq</th><th>call</th>\
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
    html.push_str("</table></section>");
}

const LEGEND: &str = "<section class=\"legend\"><h2>legend</h2>\
<span class=\"key run outcome-completed\">run completed</span>\
<span class=\"key run outcome-crash\">run crashed (no run_ended)</span>\
<span class=\"key run outcome-open\">run open</span>\
<span class=\"key attempt ok\">attempt with result</span>\
<span class=\"key attempt cut\">attempt cut off</span>\
<span class=\"key wait-key\">waiting for client / approval</span>\
<span class=\"key reason-outcome_unknown\">outcome_unknown</span>\
<span class=\"key reason-not_started\">not_started</span>\
<span class=\"key reason-replay_limit_reached\">replay_limit_reached</span>\
<span class=\"key reason-run_stopped\">run_stopped</span></section>";

/// Runs `stepjournal view`.
pub fn run(args: &ViewArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut reading = Reading::open(&args.store, args.on_corruption)?;
    let session = SessionId::from_stored(args.session.as_str());
    let records = reading.read_one(&session)?;
    let html = page(&session, &records);
    if args.output.as_os_str() == "-" {
        out.write_all(html.as_bytes())?;
        return Ok(());
    }
    std::fs::write(&args.output, html)
        .map_err(|source| CliError::WriteFile { path: args.output.clone(), source })?;
    writeln!(
        out,
        "wrote {} ({} events of session {})",
        args.output.display(),
        records.len(),
        session
    )?;
    Ok(())
}
