//! What a `wake` would do now: the library's recovery plan for the session as it is read (the
//! fold and [`plan`](stepjournal_recovery::plan), as `stepjournal plan STORE SESSION --entry
//! wake` computes it), each call's action with the rule that decided it. The page draws it; it
//! never decides anything itself.

use stepjournal_codec::{Entry, Event};
use stepjournal_recovery::{CallPlan, Config, Plan, SessionState};

use super::calls::cut;
use super::html::esc;
use crate::plan::{action_text, dry_plan};
use crate::sessions::SessionStatus;

/// The plan a `wake` would follow over `state` (a log of `len` events), tools taken with their
/// calls' saved policies. Writes nothing.
pub(super) fn wake_plan(state: &SessionState, len: u64) -> Plan {
    dry_plan(state, len, Entry::Wake, &Config::default())
}

/// The plan's decision for the call of `id` in the saved step, if the saved step's reply is at
/// `reply`.
pub(super) fn decision<'p>(
    plan: &'p Plan,
    state: &SessionState,
    reply: u64,
    id: &str,
) -> Option<&'p CallPlan> {
    let saved = state.saved_step()?;
    if saved.seq.get() != reply {
        return None;
    }
    plan.calls.iter().find(|c| c.call.as_str() == id)
}

/// The section: the plan's calls, each with its action, rule and why, and what the wake would
/// append; or why it would recover nothing, or be refused.
pub(super) fn write_wake(
    html: &mut String,
    plan: &Plan,
    state: &SessionState,
    status: SessionStatus,
) {
    html.push_str(&format!(
        "<section class=\"wake\" data-state=\"{}\"><h2>what a wake would do now</h2><p>The \
         library's recovery plan for a <code>wake</code> over the log as read (a dry run, as \
         <code>stepjournal plan STORE SESSION --entry wake</code>: nothing is written). Each \
         tool is taken with its call's saved policy; <code>plan --tools FILE</code> plans with \
         the registry as it is now.</p>",
        status.as_str()
    ));
    let note = match status {
        SessionStatus::Running => Some(
            "A runtime holds the session's run now: a wake is refused while it does; this is \
             what it would decide once the run is free.",
        ),
        SessionStatus::Locked => Some(
            "Another process has held the database's write lock all the while this page was \
             made (it may be this run's runtime, frozen inside a write transaction): a wake \
             waits for the lock, and is refused once the busy timeout passes.",
        ),
        SessionStatus::Open => Some(
            "The store cannot say whether a runtime holds the session's run: a wake is refused \
             while one does.",
        ),
        _ => None,
    };
    if let Some(note) = note {
        html.push_str(&format!("<p class=\"note\">{note}</p>"));
    }
    if let Some(e) = &plan.error {
        html.push_str(&format!(
            "<p class=\"refused\" data-kind=\"{}\">a wake would be refused: {}; nothing would be \
             appended</p></section>",
            e.kind(),
            esc(&e.to_string())
        ));
        return;
    }
    match state.saved_step() {
        None => html.push_str(
            "<p class=\"nothing\">no saved step: every reply's step is committed, so a wake \
             recovers no call</p>",
        ),
        Some(reply) => {
            html.push_str(&format!(
                "<p>saved step {} (reply at seq {}):</p><table><tr><th>call</th><th>tool</th>\
                 <th>a wake would</th><th>rule</th><th>why</th></tr>",
                reply.step, reply.seq
            ));
            for c in &plan.calls {
                let tool = state.call(&c.call).map(|r| r.call().tool.to_string());
                let reason = match &c.action {
                    stepjournal_recovery::Action::Pair { reason } => reason.as_str(),
                    _ => "",
                };
                html.push_str(&format!(
                    "<tr class=\"planned action-{}\" data-call=\"{}\" data-action=\"{}\" \
                     data-reason=\"{reason}\" data-rule=\"{}\"><td>{}</td><td>{}</td><td>{}</td>\
                     <td>{}</td><td>{}</td></tr>",
                    c.action.name(),
                    esc(c.call.as_str()),
                    c.action.name(),
                    c.rule.id,
                    esc(&cut(c.call.as_str())),
                    esc(&cut(&tool.unwrap_or_default())),
                    esc(&action_text(&c.action)),
                    c.rule.id,
                    esc(&c.rule.why)
                ));
            }
            html.push_str("</table>");
        }
    }
    let at = state.len();
    html.push_str(&format!(
        "<p>it would append {} event{} in one batch at seq {at}:</p><ol class=\"appends\" \
         start=\"{at}\">",
        plan.appends.len(),
        if plan.appends.len() == 1 { "" } else { "s" }
    ));
    for e in &plan.appends {
        let text = match e {
            Event::Paired(p) => format!("paired {} {}", p.call, p.reason.as_str()),
            other => stepjournal_codec::json::event_to_json(other),
        };
        html.push_str(&format!("<li>{}</li>", esc(&text)));
    }
    html.push_str("</ol></section>");
}
