//! What `view` draws, taken from the session's records: the runs (a crash where a run has no
//! `run_ended`), the steps, and a lane per call with its marks.

use std::collections::HashMap;

use stepjournal_codec::{CallId, CallKind, Event, Operator, Record};

use crate::operator::operator_text;

/// A run as drawn: where it begins and ends, and how it ended.
pub(super) struct RunBand {
    pub(super) id: String,
    pub(super) entry: String,
    pub(super) start: u64,
    pub(super) end: u64,
    /// `completed`, `failed`, `stopped`, `suspended`, `crash` (another run began with no
    /// `run_ended` for this one, or the log's last run, not ended, that nothing holds),
    /// `running` (the log's last run, held by a runtime) or `open` (the log's last run, and the
    /// store cannot say whether it is held).
    pub(super) outcome: String,
    /// Who began it from the command line, and why (`run_started.by`).
    pub(super) started_by: Option<Operator>,
    /// Who stopped it from the command line, and why (the stop's `run_ended.by`).
    pub(super) ended_by: Option<Operator>,
}

/// One mark in a row: a bar (`end` > `start` or a bar class) or a tick.
pub(super) struct Mark {
    /// Text drawn inside a bar.
    pub(super) text: String,
    pub(super) class: String,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) title: String,
    /// The seq whose event the mark shows.
    pub(super) seq: u64,
    pub(super) attrs: Vec<(&'static str, String)>,
}

/// A call's lane.
pub(super) struct Lane {
    pub(super) call: String,
    pub(super) tool: String,
    pub(super) kind: CallKind,
    pub(super) step: u64,
    pub(super) reply: u64,
    pub(super) marks: Vec<Mark>,
    /// The open attempts: attempt number to its mark's index.
    open: HashMap<u32, usize>,
    settled: Option<u64>,
}

/// The runs of the log; the last one, if it has not ended, drawn `last_open` (`crash`, `running`
/// or `open`, as `sessions` says of the session).
pub(super) fn runs_of(records: &[Record], last_open: &str) -> Vec<RunBand> {
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
                    started_by: e.by.clone(),
                    ended_by: None,
                });
            }
            Event::RunEnded(e) => {
                let mut run = open.take().unwrap_or_else(|| RunBand {
                    id: e.run.to_string(),
                    entry: "(a stop)".to_owned(),
                    start: r.seq.get(),
                    end: r.seq.get(),
                    outcome: String::new(),
                    started_by: None,
                    ended_by: None,
                });
                run.end = r.seq.get();
                run.outcome = e.outcome.as_str().to_owned();
                run.ended_by = e.by.clone();
                runs.push(run);
            }
            _ => {}
        }
    }
    runs.extend(open.map(|mut run| {
        run.outcome = last_open.to_owned();
        run
    }));
    runs
}

/// Where the run holding `seq` stops: its `run_ended`, or where it crashed.
fn run_end(runs: &[RunBand], seq: u64) -> u64 {
    runs.iter().find(|r| r.start <= seq && seq <= r.end).map_or(seq, |r| r.end)
}

pub(super) fn lanes_of(records: &[Record], runs: &[RunBand]) -> Vec<Lane> {
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
pub(super) fn run_marks(records: &[Record], runs: &[RunBand]) -> Vec<Mark> {
    let mut marks: Vec<Mark> = runs
        .iter()
        .map(|r| {
            let mut text = format!(
                "{} {}",
                r.id,
                match r.outcome.as_str() {
                    "crash" => "CRASHED (no run_ended)",
                    "open" => "open (the store cannot say whether it runs)",
                    "locked" => "LOCKED (its lease lapsed; another process holds the write lock)",
                    other => other,
                }
            );
            let mut title = format!("run {} ({}): {}", r.id, r.entry, r.outcome);
            let mut attrs = vec![("data-run", r.id.clone()), ("data-outcome", r.outcome.clone())];
            // Who and why, where the command line began or stopped the run.
            for (by, begun, name_attr, reason_attr) in [
                (&r.started_by, true, "data-by", "data-reason"),
                (&r.ended_by, false, "data-ended-by", "data-ended-reason"),
            ] {
                let Some(by) = by else { continue };
                let said = operator_text(by);
                text.push_str(&format!(" ({} {said})", if begun { "begun" } else { "ended" }));
                title.push_str(&format!("; {} {said}", if begun { "begun" } else { "ended" }));
                attrs.extend(by.name().map(|n| (name_attr, n.to_owned())));
                attrs.extend(by.reason().map(|n| (reason_attr, n.to_owned())));
            }
            Mark {
                text,
                class: format!("run outcome-{}", r.outcome),
                start: r.start,
                end: r.end,
                title,
                seq: r.start,
                attrs,
            }
        })
        .collect();
    for r in records {
        let seq = r.seq.get();
        let (class, title) = match &r.event {
            Event::Message(_) => ("message", "a message".to_owned()),
            Event::Rewound(e) => ("rewound", format!("rewound to checkpoint {}", e.to)),
            Event::Suspended(e) => ("suspended", format!("suspended on {} calls", e.calls.len())),
            Event::ModelAborted(e) => (
                "aborted",
                match &e.continuation {
                    Some(c) => format!("the model's reply was aborted; continuation {c}"),
                    None => "the model's reply was aborted".to_owned(),
                },
            ),
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

pub(super) fn step_marks(records: &[Record]) -> Vec<Mark> {
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
