//! What was said, in log order: the messages, each reply's text (the model's answer of its
//! step), answers cut off, and the final answer: the last reply's text once the session's last
//! run completed, or why there is none yet.

use stepjournal_codec::Role;
use stepjournal_recovery::SessionState;

use super::calls::cut;
use super::html::esc;
use crate::sessions::SessionStatus;

/// One thing said.
struct Said {
    seq: u64,
    class: &'static str,
    who: String,
    text: String,
}

/// The section.
pub(super) fn write_said(html: &mut String, state: &SessionState, status: SessionStatus) {
    let mut said: Vec<Said> = Vec::new();
    for m in state.messages() {
        let who = match m.role {
            Role::User => "user",
        };
        said.push(Said {
            seq: m.seq.get(),
            class: "message",
            who: who.to_owned(),
            text: m.text.clone(),
        });
    }
    for r in state.replies() {
        said.push(Said {
            seq: r.seq.get(),
            class: "reply",
            who: format!("model, step {} ({} calls)", r.step, r.calls().len()),
            text: r.text.clone(),
        });
    }
    for a in state.aborts() {
        said.push(Said {
            seq: a.seq.get(),
            class: "aborted",
            who: "model, cut off".to_owned(),
            text: a.partial.clone(),
        });
    }
    said.sort_by_key(|s| s.seq);
    html.push_str("<section class=\"said\"><h2>what was said</h2><ol class=\"said-list\">");
    for s in &said {
        html.push_str(&format!(
            "<li class=\"said-{}\" data-seq=\"{}\"><span class=\"who\">seq {}, {}</span> {}</li>",
            s.class,
            s.seq,
            s.seq,
            esc(&s.who),
            esc(&cut(&s.text))
        ));
    }
    html.push_str("</ol>");
    let last_reply = said.iter().rev().find(|s| s.class == "reply" && !s.text.is_empty());
    match (status, last_reply) {
        (SessionStatus::Completed, Some(r)) => html.push_str(&format!(
            "<p class=\"final\" data-seq=\"{}\"><b>final answer</b> (seq {}): {}</p>",
            r.seq,
            r.seq,
            esc(&cut(&r.text))
        )),
        (SessionStatus::Completed, None) => {
            html.push_str("<p class=\"final none\">the run completed with no reply text</p>")
        }
        (status, _) => html.push_str(&format!(
            "<p class=\"final none\" data-state=\"{}\">no final answer: the session's last run \
             is {}, not completed</p>",
            status.as_str(),
            status.as_str()
        )),
    }
    html.push_str("</section>");
}
