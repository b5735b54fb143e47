//! What the page says of each call beside its lane, taken from the folded session: its kind,
//! policy and order (group, sequential chain), the call it waits behind (the order rule's
//! [`behind`], nearest first in each lane), and its facts: arguments, the output each attempt
//! committed, and what answered it.

use std::collections::HashMap;

use stepjournal_codec::{CallId, Event, Record};
use stepjournal_recovery::order::{Lane, behind};
use stepjournal_recovery::{CallRecord, SessionState};

/// The longest text a fact shows whole; longer text is cut, its length given.
const SHOWN: usize = 240;

/// A call's row, keyed by its reply's seq and its id.
pub(super) type RowOf = HashMap<(u64, CallId), usize>;

/// `text` cut to [`SHOWN`] characters, with its length in bytes when cut.
pub(super) fn cut(text: &str) -> String {
    if text.chars().count() <= SHOWN {
        return text.to_owned();
    }
    let head: String = text.chars().take(SHOWN).collect();
    format!("{head}... ({} bytes)", text.len())
}

/// An arrow from a call (`from`) to a call it waits behind (`to`), in one lane of their reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Arrow {
    pub(super) from: CallId,
    pub(super) to: CallId,
    /// The lane, as the order rule names it (`group `email``, `the sequential chain`).
    pub(super) via: String,
    /// The rows of `from` and `to` (`to` above).
    pub(super) from_row: usize,
    pub(super) to_row: usize,
    /// The column of the gutter it is drawn in, none of the others over the same rows.
    pub(super) slot: usize,
}

/// Every arrow of the session: for each call, one per lane it is in, to the nearest earlier
/// call of its reply in that lane (the chain reads call by call).
pub(super) fn arrows(state: &SessionState, rows: &RowOf) -> Vec<Arrow> {
    let mut arrows = Vec::new();
    for reply in state.replies() {
        let calls = state.calls_of(reply);
        for (i, call) in calls.iter().enumerate() {
            let mut nearest: Vec<(Lane<'_>, &CallRecord<'_>)> = Vec::new();
            for (ahead, lane) in behind(&calls, i) {
                match nearest.iter_mut().find(|(l, _)| *l == lane) {
                    Some(entry) => entry.1 = ahead,
                    None => nearest.push((lane, ahead)),
                }
            }
            let row = |c: &CallRecord<'_>| rows.get(&(reply.seq.get(), c.id().clone())).copied();
            for (lane, ahead) in nearest {
                let (Some(from_row), Some(to_row)) = (row(call), row(ahead)) else { continue };
                arrows.push(Arrow {
                    from: call.id().clone(),
                    to: ahead.id().clone(),
                    via: lane.to_string(),
                    from_row,
                    to_row,
                    slot: 0,
                });
            }
        }
    }
    assign_slots(&mut arrows);
    arrows
}

/// Gives each arrow the first gutter column no arrow over any of its rows holds.
fn assign_slots(arrows: &mut [Arrow]) {
    let mut taken: Vec<(usize, usize, usize)> = Vec::new();
    for a in arrows.iter_mut() {
        let (lo, hi) = (a.to_row.min(a.from_row), a.to_row.max(a.from_row));
        let slot = (0..)
            .find(|s| !taken.iter().any(|&(t, l, h)| t == *s && l <= hi && lo <= h))
            .unwrap_or(0);
        a.slot = slot;
        taken.push((slot, lo, hi));
    }
}

/// One line of what a call said or was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fact {
    /// `args`, `output`, `result`, `error`, `answer`, `approval`, `paired` or `pending`.
    pub(super) class: &'static str,
    pub(super) label: String,
    pub(super) text: String,
}

/// The facts of one call: its arguments, each attempt's committed output (`partial` when the
/// attempt has no result), and what answered it, or that nothing has.
pub(super) fn facts(call: &CallRecord<'_>, records: &[Record]) -> Vec<Fact> {
    let mut facts =
        vec![Fact { class: "args", label: "args".to_owned(), text: cut(call.call().args.get()) }];
    for attempt in call.attempts() {
        let output: String = call.chunks_of(attempt.attempt).map(|c| c.text).collect();
        if output.is_empty() {
            continue;
        }
        let finished = call.results().any(|r| r.attempt == attempt.attempt);
        let label = if finished {
            format!("output #{}", attempt.attempt)
        } else {
            format!("partial output #{} (no result)", attempt.attempt)
        };
        facts.push(Fact { class: "output", label, text: cut(&json_string(&output)) });
    }
    for r in call.results() {
        let (class, what) =
            if r.is_error { ("error", "error result") } else { ("result", "result") };
        let label = format!("{what} #{}", r.attempt);
        facts.push(Fact { class, label, text: cut(r.output.get()) });
    }
    for a in call.answers() {
        facts.push(Fact { class: "answer", label: "answer".to_owned(), text: cut(a.output.get()) });
    }
    for a in call.approvals() {
        let text = if a.approved { "approved" } else { "denied" };
        facts.push(Fact { class: "approval", label: "approval".to_owned(), text: text.into() });
    }
    for p in call.pairings() {
        let mut label = format!("paired {}", p.reason.as_str());
        let rule = crate::store::at_seq(records, p.seq.get()).and_then(|r| match &r.event {
            Event::Paired(e) if r.seq == p.seq => e.rule.as_deref(),
            _ => None,
        });
        if let Some(rule) = rule {
            label.push_str(&format!(" by {rule}"));
        }
        if let Some(by) = p.voided_by {
            label.push_str(&format!(" (voided by the rewound at seq {by})"));
        }
        facts.push(Fact { class: "paired", label, text: cut(&p.message) });
    }
    if !call.is_resolved() {
        facts.push(Fact {
            class: "pending",
            label: "no answer".to_owned(),
            text: "nothing has answered the call".to_owned(),
        });
    }
    facts
}

/// A text as a JSON string literal (quoted, its controls escaped).
fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// How a call is ordered: `group NAME`, `sequential`, both, or nothing.
pub(super) fn order_text(call: &CallRecord<'_>) -> String {
    let c = call.call();
    let mut parts = Vec::new();
    if let Some(g) = &c.group {
        parts.push(format!("group {g}"));
    }
    if c.sequential {
        parts.push("sequential".to_owned());
    }
    parts.join(", ")
}

/// The call of `id` in the reply at `reply`.
pub(super) fn record_of<'s>(
    state: &'s SessionState,
    reply: u64,
    id: &str,
) -> Option<CallRecord<'s>> {
    let reply = state.replies().iter().find(|r| r.seq.get() == reply)?;
    state.calls_of(reply).into_iter().find(|c| c.id().as_str() == id)
}
