//! The timeline `stepjournal show` prints: a line an event (runs, steps, calls, attempts,
//! output folded, results, pairings and what voided them), painted when the output is a
//! terminal and wrapped to its width.

use std::collections::HashMap;
use std::io::Write;

use stepjournal_codec::{Call, Entry, Event, PairReason, Record, ResumeMode, RunOutcome, Seq};
use stepjournal_recovery::SessionState;

use crate::columns::bounded;
use crate::operator::operator_text;
use crate::sessions::{Held, SessionStatus, SessionSummary};
use crate::shown::{Shown, escape};
use crate::time::rfc3339;

/// How text is painted: ANSI colours on a terminal, nothing otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    colour: bool,
}

#[derive(Debug, Clone, Copy)]
enum Paint {
    Bold,
    Dim,
    Good,
    Warn,
    Bad,
    Id,
}

impl Style {
    /// Plain text.
    pub const PLAIN: Style = Style { colour: false };
    /// ANSI colours.
    pub const COLOUR: Style = Style { colour: true };

    fn paint(self, paint: Paint, text: &str) -> String {
        if !self.colour {
            return text.to_owned();
        }
        let code = match paint {
            Paint::Bold => "1",
            Paint::Dim => "2",
            Paint::Good => "32",
            Paint::Warn => "33",
            Paint::Bad => "1;31",
            Paint::Id => "36",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

/// The longest text shown whole; longer text is cut, with its length given.
const SHOWN: usize = 100;

/// A string as a JSON string literal (quoted, escaped: one line), cut when long; what JSON
/// leaves raw (DEL, C1 and bidirectional controls) shown escaped.
fn quoted(text: &str) -> String {
    let cut: String = text.chars().take(SHOWN).collect();
    let lit = escape(&serde_json::Value::String(cut).to_string());
    if text.chars().count() > SHOWN { format!("{lit}... ({} bytes)", text.len()) } else { lit }
}

/// JSON text, cut when long, with the characters JSON strings may hold raw shown escaped.
fn json_text(text: &str) -> String {
    if text.chars().count() > SHOWN {
        let cut: String = text.chars().take(SHOWN).collect();
        format!("{}... ({} bytes)", escape(&cut), text.len())
    } else {
        escape(text)
    }
}

fn entry_text(entry: &Entry) -> String {
    match entry {
        Entry::Wake => "wake".to_owned(),
        Entry::Resume(ResumeMode::Continue) => "resume (continue)".to_owned(),
        Entry::Resume(ResumeMode::WithMessage { message }) => {
            format!("resume with message {}", quoted(message))
        }
        Entry::Resume(ResumeMode::FromCheckpoint { checkpoint }) => {
            format!("resume from checkpoint {}", Shown(checkpoint))
        }
        Entry::Retry { checkpoint, message } => {
            let mut s = "retry".to_owned();
            if let Some(c) = checkpoint {
                s.push_str(&format!(" from checkpoint {}", Shown(c)));
            }
            if let Some(m) = message {
                s.push_str(&format!(" with message {}", quoted(m)));
            }
            s
        }
        Entry::NewTurn { message } => format!("new turn {}", quoted(message)),
        Entry::Stop => "stop".to_owned(),
    }
}

/// A reply's calls, one line each, in aligned columns: id, tool, kind, policy, order, args.
fn call_lines(calls: &[Call]) -> Vec<String> {
    let ids: Vec<(String, String)> =
        calls.iter().map(|c| (escape(c.call.as_str()), escape(c.tool.as_str()))).collect();
    let width = |f: &dyn Fn(&Call) -> usize| bounded(calls.iter().map(f).max().unwrap_or(0));
    let w_id = bounded(ids.iter().map(|(id, _)| id.chars().count()).max().unwrap_or(0));
    let w_tool = bounded(ids.iter().map(|(_, tool)| tool.chars().count()).max().unwrap_or(0));
    let w_kind = width(&|c| c.kind.as_str().len());
    let w_replay = width(&|c| c.replay.as_str().len());
    calls
        .iter()
        .zip(&ids)
        .map(|(c, (id, tool))| {
            let mut s = format!(
                "{id:<w_id$}  {tool:<w_tool$}  {:<w_kind$}  {:<w_replay$}",
                c.kind.as_str(),
                c.replay.as_str()
            );
            if let Some(g) = &c.group {
                s.push_str(&format!("  group {}", Shown(g)));
            }
            if c.sequential {
                s.push_str("  sequential");
            }
            s.push_str(&format!("  args {}", json_text(c.args.get())));
            s
        })
        .collect()
}

/// What a later `rewound` voided: `paired` and `run_ended` events by seq, to the rewind's seq.
fn voided_map(state: &SessionState) -> HashMap<Seq, Seq> {
    let mut voided = HashMap::new();
    for end in state.run_ends() {
        if let Some(by) = end.voided_by {
            voided.insert(end.seq, by);
        }
    }
    for reply in state.replies() {
        for call in state.calls_of(reply) {
            for p in call.pairings() {
                if let Some(by) = p.voided_by {
                    voided.insert(p.seq, by);
                }
            }
        }
    }
    voided
}

/// One line of the timeline before it is laid out.
struct Line {
    seq: String,
    at: String,
    depth: usize,
    text: String,
    /// Lines under it without a seq (a reply's calls).
    more: Vec<String>,
}

/// Renders the timeline of a session from its records (in order), an open run shown `open`.
pub fn render(records: &[Record], style: Style, out: &mut dyn Write) -> std::io::Result<()> {
    render_held(records, Held::Unknown, style, None, out).map(|_| ())
}

/// The width of the seq column for a session of `len` events (at least 3).
pub(crate) fn seq_width(len: usize) -> usize {
    len.saturating_sub(1).to_string().len().max(3)
}
/// How the timeline's lines are drawn: their colours, the width they wrap to, the seq column's
/// width.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Screen {
    pub style: Style,
    pub width: Option<usize>,
    pub seq_w: usize,
}

/// The width of the time column.
const AT_W: usize = 24;

/// Renders the timeline, an open run told running or crashed by `held`, lines wrapped to
/// `width` columns when given; returns the timeline's lines as printed (for `--follow`).
pub fn render_held(
    records: &[Record],
    held: Held,
    style: Style,
    width: Option<usize>,
    out: &mut dyn Write,
) -> std::io::Result<Vec<String>> {
    let state = crate::store::fold_records(records);
    let Some(first) = records.first() else { return Ok(Vec::new()) };
    let summary = SessionSummary::of_held(
        first.session.clone(),
        records.len() as u64,
        records.last().map_or(first.at, |r| r.at),
        &state,
        held,
    );
    let mut head = Vec::new();
    header(&summary, &state, style, &mut head)?;
    for line in String::from_utf8_lossy(&head).lines() {
        match width {
            Some(w) => {
                for part in crate::wrap::wrap(line, w, 4) {
                    writeln!(out, "{part}")?;
                }
            }
            None => writeln!(out, "{line}")?,
        }
    }
    writeln!(out)?;
    let seq_w = seq_width(records.len());
    let head = format!("{:>seq_w$}  {:<AT_W$}  event", "seq", "time (UTC)");
    writeln!(out, "{}", style.paint(Paint::Dim, &head))?;
    let lines = timeline_lines(records, style, seq_w);
    for l in &lines {
        write_wrapped(l, width, seq_w, out)?;
    }
    Ok(lines)
}

/// The timeline's lines, each event's with the lines under it.
pub(crate) fn timeline_lines(records: &[Record], style: Style, seq_w: usize) -> Vec<String> {
    let state = crate::store::fold_records(records);
    let voided = voided_map(&state);
    let mut printed = Vec::new();
    for l in timeline(records, &voided, style) {
        let indent = "  ".repeat(l.depth);
        let at = style.paint(Paint::Dim, &format!("{:<AT_W$}", l.at));
        let mut text = format!("{:>seq_w$}  {at}  {indent}{}", l.seq, l.text);
        for m in &l.more {
            text.push_str(&format!("\n{:>seq_w$}  {:<AT_W$}  {indent}    {m}", "", ""));
        }
        printed.push(text);
    }
    printed
}

/// Writes a timeline line, each of its lines longer than `width` continued on the next lines
/// under the event column.
pub(crate) fn write_wrapped(
    text: &str,
    width: Option<usize>,
    seq_w: usize,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    for line in text.split('\n') {
        match width {
            Some(w) => {
                for part in crate::wrap::wrap(line, w, seq_w + AT_W + 8) {
                    writeln!(out, "{part}")?;
                }
            }
            None => writeln!(out, "{line}")?,
        }
    }
    Ok(())
}

fn header(
    s: &SessionSummary,
    state: &SessionState,
    style: Style,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let paint = match s.status {
        SessionStatus::Failed => Paint::Bad,
        SessionStatus::Crashed => Paint::Bad,
        SessionStatus::Open
        | SessionStatus::Locked
        | SessionStatus::Stopped
        | SessionStatus::Suspended => Paint::Warn,
        SessionStatus::Completed | SessionStatus::Running => Paint::Good,
    };
    let status = style.paint(paint, s.status.as_str());
    writeln!(
        out,
        "session {}: {} events, state {status}, last append {}",
        style.paint(Paint::Bold, &escape(s.session.as_str())),
        s.events,
        rfc3339(s.last_append)
    )?;
    let Some(reply) = state.saved_step() else {
        return writeln!(out, "no saved step: every reply's step is committed");
    };
    let calls = state.calls_of(reply);
    let open: Vec<String> = calls
        .iter()
        .filter(|c| !c.is_resolved())
        .map(|c| {
            let n = c.bodies();
            let bodies = format!("{n} attempt{}", if n == 1 { "" } else { "s" });
            let call = c.call();
            format!(
                "{} ({}, {}, {}, {bodies})",
                Shown(c.id()),
                Shown(&call.tool),
                call.kind.as_str(),
                call.replay.as_str()
            )
        })
        .collect();
    if open.is_empty() {
        writeln!(
            out,
            "saved step {} (reply at seq {}): every call is resolved",
            reply.step, reply.seq
        )
    } else {
        let n = open.len();
        writeln!(
            out,
            "saved step {} (reply at seq {}): {} unresolved call{}: {}",
            reply.step,
            reply.seq,
            style.paint(Paint::Warn, &n.to_string()),
            if n == 1 { "" } else { "s" },
            open.join(", ")
        )
    }
}

fn timeline(records: &[Record], voided: &HashMap<Seq, Seq>, style: Style) -> Vec<Line> {
    let mut lines: Vec<Line> = Vec::with_capacity(records.len());
    let mut i = 0;
    while let Some(r) = records.get(i) {
        let mut line = Line {
            seq: r.seq.to_string(),
            at: rfc3339(r.at),
            depth: 2,
            text: String::new(),
            more: Vec::new(),
        };
        let void_note = |seq: Seq| {
            voided.get(&seq).map_or(String::new(), |by| {
                style.paint(Paint::Dim, &format!(" (voided by the rewound at seq {by})"))
            })
        };
        line.text = match &r.event {
            Event::RunStarted(e) => {
                line.depth = 0;
                let mut text = format!("run {} started: {}", Shown(&e.run), entry_text(&e.entry));
                if let Some(by) = &e.by {
                    text.push_str(&format!(" ({})", operator_text(by)));
                }
                style.paint(Paint::Bold, &text)
            }
            Event::RunEnded(e) => {
                line.depth = 0;
                let paint = match e.outcome {
                    RunOutcome::Completed => Paint::Good,
                    RunOutcome::Failed => Paint::Bad,
                    RunOutcome::Stopped | RunOutcome::Suspended => Paint::Warn,
                };
                let mut t = format!("run {} ended ", Shown(&e.run));
                t.push_str(&style.paint(paint, e.outcome.as_str()));
                if let Some(err) = &e.error {
                    t.push_str(&format!(": error {}", quoted(err)));
                }
                if let Some(by) = &e.by {
                    t.push_str(&format!(" ({})", operator_text(by)));
                }
                t.push_str(&void_note(r.seq));
                t
            }
            Event::Rewound(e) => {
                line.depth = 0;
                format!(
                    "rewound to checkpoint {}: pairings and run ends after it stop counting",
                    Shown(&e.to)
                )
            }
            Event::Message(e) => {
                line.depth = 1;
                format!("message from user: {}", quoted(&e.text))
            }
            Event::ReplyCommitted(e) => {
                line.depth = 1;
                line.more = call_lines(&e.calls);
                let n = e.calls.len();
                let mut t = style.paint(Paint::Bold, &format!("step {} reply", e.step));
                t.push_str(&format!(
                    ", checkpoint {}, {n} call{}",
                    Shown(&e.checkpoint),
                    if n == 1 { "" } else { "s" }
                ));
                if !e.text.is_empty() {
                    t.push_str(&format!(": {}", quoted(&e.text)));
                }
                t
            }
            Event::StepCommit(e) => {
                line.depth = 1;
                format!("step {} committed, checkpoint {}", e.step, Shown(&e.checkpoint))
            }
            Event::Suspended(e) => {
                line.depth = 1;
                let ids: Vec<String> = e.calls.iter().map(|c| escape(c.as_str())).collect();
                format!("suspended, waiting for {}", ids.join(", "))
            }
            Event::ModelAborted(e) => {
                line.depth = 1;
                let mut t = format!("model answer cut off: partial {}", quoted(&e.partial));
                if let Some(c) = &e.continuation {
                    t.push_str(&format!(", continuation {}", Shown(c)));
                }
                t
            }
            Event::ForkedFrom(e) => {
                line.depth = 0;
                let text = format!(
                    "forked from session {} at its step commit {} (seq {} there)",
                    Shown(&e.original),
                    Shown(&e.checkpoint),
                    e.commit_seq
                );
                style.paint(Paint::Bold, &text)
            }
            Event::Trimmed(e) => {
                line.depth = 0;
                let text = format!(
                    "trimmed: the events before seq {} were dropped ({} turns in all)",
                    e.before, e.turns
                );
                style.paint(Paint::Bold, &text)
            }
            Event::Snapshot(e)
                if r.seq == Seq(1)
                    && e.len == 1
                    && i == 1
                    && matches!(records.first().map(|r| &r.event), Some(Event::ForkedFrom(_))) =>
            {
                line.depth = 0;
                let mut t = "the original's state at the fork".to_owned();
                if let Some(commit) = &e.commit {
                    t.push_str(&format!(", after step {} committed", commit.step));
                }
                style.paint(Paint::Dim, &t)
            }
            Event::Snapshot(e) => {
                line.depth = 0;
                let mut t = format!("snapshot of the {} events before it", e.len);
                if let Some(commit) = &e.commit {
                    t.push_str(&format!(", after step {} committed", commit.step));
                }
                style.paint(Paint::Dim, &t)
            }
            Event::DispatchMinted(e) => {
                format!("{} dispatch {}", id(style, e.call.as_str()), Shown(&e.dispatch))
            }
            Event::AttemptStarted(e) => {
                format!("{} attempt {} started", id(style, e.call.as_str()), e.attempt)
            }
            Event::OutputChunk(e) => {
                // Fold the chunks of this attempt that follow each other.
                let mut text = e.text.clone();
                let mut n = 1;
                while let Some(Record { event: Event::OutputChunk(next), seq, .. }) =
                    records.get(i + 1)
                    && next.call == e.call
                    && next.attempt == e.attempt
                {
                    text.push_str(&next.text);
                    n += 1;
                    i += 1;
                    line.seq = format!("{}-{seq}", r.seq);
                }
                let what = if n == 1 {
                    "output".to_owned()
                } else {
                    format!("output, {n} chunks, {} bytes", text.len())
                };
                format!(
                    "{} attempt {} {what}: {}",
                    id(style, e.call.as_str()),
                    e.attempt,
                    quoted(&text)
                )
            }
            Event::ToolResult(e) => {
                let (paint, what) =
                    if e.is_error { (Paint::Bad, "error result") } else { (Paint::Good, "result") };
                format!(
                    "{} {} of attempt {}: {}",
                    id(style, e.call.as_str()),
                    style.paint(paint, what),
                    e.attempt,
                    json_text(e.output.get())
                )
            }
            Event::ApprovalDecided(e) => {
                let what = if e.approved {
                    style.paint(Paint::Good, "approved")
                } else {
                    style.paint(Paint::Warn, "denied")
                };
                format!("{} approval {what}", id(style, e.call.as_str()))
            }
            Event::ClientAnswer(e) => {
                format!(
                    "{} client answer: {}",
                    id(style, e.call.as_str()),
                    json_text(e.output.get())
                )
            }
            Event::ChildAttached(e) => {
                format!(
                    "{} child attached: session {}",
                    id(style, e.call.as_str()),
                    Shown(&e.child)
                )
            }
            Event::Paired(e) => {
                let paint = match e.reason {
                    PairReason::OutcomeUnknown | PairReason::ReplayLimitReached => Paint::Warn,
                    PairReason::NotStarted | PairReason::RunStopped => Paint::Dim,
                };
                let mut t = format!(
                    "{} paired {}",
                    id(style, e.call.as_str()),
                    style.paint(paint, e.reason.as_str())
                );
                if let Some(rule) = &e.rule {
                    t.push_str(&format!(" by rule {}", Shown(rule)));
                }
                if !e.partial.is_empty() {
                    t.push_str(&format!(", partial output {}", quoted(&e.partial)));
                }
                t.push_str(&void_note(r.seq));
                if !e.message.is_empty() {
                    line.more.push(format!("message: {}", quoted(&e.message)));
                }
                t
            }
        };
        lines.push(line);
        i += 1;
    }
    lines
}

fn id(style: Style, call: &str) -> String {
    style.paint(Paint::Id, &escape(call))
}
