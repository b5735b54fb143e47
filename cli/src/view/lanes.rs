//! The call lanes as drawn: a gutter of arrows (a call to the call it waits behind), a label
//! (the call, its tool, kind, policy and order, what it waits behind, what a wake would do to
//! it and by which rule), the track of its marks, and its facts (arguments, output, answer).

use stepjournal_codec::Record;
use stepjournal_recovery::{Plan, SessionState};

use super::calls::{Arrow, Fact, RowOf, arrows, cut, facts, order_text, record_of};
use super::decided::{Decided, decided};
use super::html::{esc, write_marks};
use super::marks::{Lane, RunBand, lanes_of};
use super::wake::decision;
use crate::plan::action_text;

/// A gutter column's width, in px.
const SLOT_PX: usize = 10;

/// One lane's row, ready to write.
struct Row {
    lane: Lane,
    policy: String,
    order: String,
    behind: Vec<String>,
    wake: Option<(String, String, &'static str, String)>,
    /// What earlier entries decided for it, as the log bears it out.
    decided: Vec<Decided>,
    facts: Vec<Fact>,
}

/// Every lane of the session, with its arrows.
pub(super) struct Lanes {
    rows: Vec<Row>,
    arrows: Vec<Arrow>,
}

/// The lanes of `records`, described from `state` and the wake `plan`.
pub(super) fn lanes(
    records: &[Record],
    runs: &[RunBand],
    state: &SessionState,
    plan: &Plan,
) -> Lanes {
    let marks = lanes_of(records, runs);
    let mut index = RowOf::new();
    for (i, lane) in marks.iter().enumerate() {
        if let Some(c) = record_of(state, lane.reply, &lane.call) {
            index.insert((lane.reply, c.id().clone()), i);
        }
    }
    let arrows = arrows(state, &index);
    let mut earlier = decided(records);
    let rows = marks
        .into_iter()
        .enumerate()
        .map(|(i, lane)| {
            let record = record_of(state, lane.reply, &lane.call);
            let wake = decision(plan, state, lane.reply, &lane.call).map(|d| {
                let reason = match &d.action {
                    stepjournal_recovery::Action::Pair { reason } => reason.as_str().to_owned(),
                    _ => String::new(),
                };
                (d.action.name().to_owned(), action_text(&d.action), d.rule.id, reason)
            });
            let behind = arrows
                .iter()
                .filter(|a| a.from_row == i)
                .map(|a| format!("waits behind {} ({})", a.to, a.via))
                .collect();
            Row {
                policy: record.map(|c| c.call().replay.as_str().to_owned()).unwrap_or_default(),
                order: record.as_ref().map(order_text).unwrap_or_default(),
                facts: record.as_ref().map(|c| facts(c, records)).unwrap_or_default(),
                decided: record
                    .and_then(|c| earlier.remove(&(lane.reply, c.id().clone())))
                    .unwrap_or_default(),
                behind,
                wake,
                lane,
            }
        })
        .collect();
    Lanes { rows, arrows }
}

impl Lanes {
    /// How many lanes.
    pub(super) fn count(&self) -> usize {
        self.rows.len()
    }

    /// The gutter's width: a column per arrow drawn side by side, and room for the heads.
    pub(super) fn gutter_px(&self) -> usize {
        self.slots() * SLOT_PX + 12
    }

    fn slots(&self) -> usize {
        self.arrows.iter().map(|a| a.slot + 1).max().unwrap_or(0)
    }

    /// Writes every lane's row.
    pub(super) fn write(&self, html: &mut String, n: u64, records: &[Record]) {
        for (i, row) in self.rows.iter().enumerate() {
            let lane = &row.lane;
            let (action, rule) = row
                .wake
                .as_ref()
                .map_or((String::new(), ""), |(action, _, rule, _)| (action.clone(), *rule));
            html.push_str(&format!(
                "<div class=\"row lane\" data-call=\"{}\" data-tool=\"{}\" data-step=\"{}\" \
                 data-kind=\"{}\" data-policy=\"{}\" data-order=\"{}\" data-wake-action=\"{}\" \
                 data-wake-rule=\"{}\">",
                esc(&lane.call),
                esc(&lane.tool),
                lane.step,
                lane.kind.as_str(),
                esc(&row.policy),
                esc(&row.order),
                esc(&action),
                rule
            ));
            self.write_gutter(html, i);
            write_label(html, row);
            html.push_str("<div class=\"track\">");
            write_marks(html, &lane.marks, n, records, &[("data-call", lane.call.clone())]);
            html.push_str("</div>");
            write_facts(html, &row.facts);
            html.push_str("</div>");
        }
    }

    /// The gutter of row `i`: each arrow over it as a vertical segment in its column, the
    /// waiting call's row with the arrow's tail, the awaited call's row with its head.
    fn write_gutter(&self, html: &mut String, i: usize) {
        let slots = self.slots();
        html.push_str("<div class=\"order\">");
        for a in &self.arrows {
            let (top, bottom) = (a.to_row.min(a.from_row), a.to_row.max(a.from_row));
            if i < top || i > bottom {
                continue;
            }
            let x = (slots - a.slot) * SLOT_PX - SLOT_PX / 2;
            let data = format!(
                "data-from=\"{}\" data-to=\"{}\" data-via=\"{}\" title=\"{} waits behind {} ({})\"",
                esc(a.from.as_str()),
                esc(a.to.as_str()),
                esc(&a.via),
                esc(a.from.as_str()),
                esc(a.to.as_str()),
                esc(&a.via)
            );
            let (class, span) = if i == a.from_row && i == a.to_row {
                ("arrow-self", "top:50%;height:0")
            } else if i == a.from_row {
                // The tail: from the middle of the waiting call's row, up.
                (
                    "arrow-from",
                    if a.from_row > a.to_row { "top:0;height:50%" } else { "top:50%;bottom:-1px" },
                )
            } else if i == a.to_row {
                (
                    "arrow-to",
                    if a.from_row > a.to_row { "top:50%;bottom:-1px" } else { "top:0;height:50%" },
                )
            } else {
                ("arrow-through", "top:-1px;bottom:-1px")
            };
            html.push_str(&format!(
                "<span class=\"seg {class}\" {data} style=\"left:{x}px;{span}\"></span>"
            ));
            if i == a.from_row || i == a.to_row {
                let end = if i == a.to_row { "stub head" } else { "stub tail" };
                html.push_str(&format!(
                    "<span class=\"{end}\" {data} style=\"left:{x}px\"></span>"
                ));
            }
        }
        html.push_str("</div>");
    }
}

fn write_label(html: &mut String, row: &Row) {
    let lane = &row.lane;
    html.push_str(&format!(
        "<div class=\"label\" title=\"reply at seq {}\"><div class=\"call-id\"><b>{}</b> {}</div>\
         <div class=\"call-meta\"><span class=\"kind\">{}</span> <span class=\"policy policy-{}\">\
         {}</span>",
        lane.reply,
        esc(&cut(&lane.call)),
        esc(&cut(&lane.tool)),
        lane.kind.as_str(),
        esc(&row.policy),
        esc(&row.policy)
    ));
    if !row.order.is_empty() {
        html.push_str(&format!(" <span class=\"call-order\">{}</span>", esc(&row.order)));
    }
    html.push_str("</div>");
    for b in &row.behind {
        html.push_str(&format!("<div class=\"call-behind\">{}</div>", esc(b)));
    }
    for d in &row.decided {
        html.push_str(&format!(
            "<div class=\"call-decided action-{}\" data-run-seq=\"{}\" data-action=\"{}\" \
             data-rule=\"{}\">{} at seq {}: {} <span class=\"rule\">by {}</span></div>",
            d.action,
            d.run_seq,
            d.action,
            d.rule,
            esc(&d.entry),
            d.run_seq,
            esc(&d.text),
            d.rule
        ));
    }
    if let Some((action, text, rule, reason)) = &row.wake {
        html.push_str(&format!(
            "<div class=\"call-wake action-{action}\" data-action=\"{action}\" data-rule=\"{rule}\" \
             data-reason=\"{reason}\">wake: {} <span class=\"rule\">by {rule}</span></div>",
            esc(text)
        ));
    }
    html.push_str("</div>");
}

fn write_facts(html: &mut String, facts: &[Fact]) {
    html.push_str("<div class=\"facts\">");
    for f in facts {
        html.push_str(&format!(
            "<div class=\"fact fact-{}\"><span class=\"fact-label\">{}</span> <span \
             class=\"fact-text\">{}</span></div>",
            f.class,
            esc(&f.label),
            esc(&f.text)
        ));
    }
    html.push_str("</div>");
}
