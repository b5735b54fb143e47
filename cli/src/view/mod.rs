//! `stepjournal view`: one session's timeline as one self-contained HTML file (inline CSS and
//! script, nothing fetched): runs as bands (a run that ended without `run_ended` drawn as a
//! crash), steps, one lane per call with each attempt as a bar from `attempt_started` to its
//! result, output chunks as ticks, pairings coloured by reason with their rule and message,
//! client and approval waits, and the recovery decisions; each mark shows its event's JSON
//! when clicked (and its summary on hover).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use stepjournal_codec::json::record_to_export_line;
use stepjournal_codec::{Event, Record, SessionId};

mod marks;

use marks::{Mark, lanes_of, run_marks, runs_of, step_marks};

use super::CliError;
use super::reading::{OnDamage, Reading};
use super::time::rfc3339;
use crate::shown::{Shown, json_for_terminal};

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

/// Text for HTML (element content and quoted attribute values alike). The characters the
/// terminal output escapes (controls, line separators, bidirectional controls) are written as
/// the same visible `\u{HEX}`, so `c-\u{202e}evil` never reads reversed on the page; newlines
/// stay.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c != '\n' && crate::shown::is_escaped(c) => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
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
        // The same JSON value, with the characters the terminal escapes written as JSON escapes
        // (`esc` would otherwise make them visible text inside its strings, no longer JSON).
        let json = records
            .get(m.seq as usize)
            .map(|r| json_for_terminal(&record_to_export_line(r)))
            .unwrap_or_default();
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

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

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
        Shown(args.output.display()),
        records.len(),
        Shown(&session)
    )?;
    Ok(())
}
