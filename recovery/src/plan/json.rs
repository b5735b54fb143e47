//! The plan's JSON form, exactly FORMAT.md's "The plan", with `rule` and `why` on every call.

use super::{Action, CallPlan, Plan};
use serde_json::Value;
use stepjournal_codec::DispatchId;
use stepjournal_codec::json::event_to_json;

fn string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

fn dispatch(d: &Option<DispatchId>) -> String {
    d.as_ref().map_or_else(|| "null".to_owned(), |d| string(d.as_str()))
}

fn call_json(c: &CallPlan, out: &mut String) {
    out.push_str("{\"call\":");
    out.push_str(&string(c.call.as_str()));
    out.push_str(",\"action\":");
    out.push_str(&string(c.action.name()));
    match &c.action {
        Action::Keep | Action::Await => {}
        Action::Run { dispatch: d, attempt } => {
            out.push_str(",\"dispatch\":");
            out.push_str(&dispatch(d));
            out.push_str(",\"attempt\":");
            out.push_str(&attempt.get().to_string());
        }
        Action::Pair { reason } => {
            out.push_str(",\"reason\":");
            out.push_str(&string(reason.as_str()));
        }
        Action::Reattach { dispatch: d, child } => {
            out.push_str(",\"dispatch\":");
            out.push_str(&dispatch(d));
            out.push_str(",\"child\":");
            out.push_str(&string(child.as_str()));
        }
        Action::StartChild { dispatch: d } | Action::ReenterChild { dispatch: d } => {
            out.push_str(",\"dispatch\":");
            out.push_str(&dispatch(d));
        }
    }
    out.push_str(",\"rule\":");
    out.push_str(&string(c.rule.id));
    out.push_str(",\"why\":");
    out.push_str(&string(&c.rule.why));
    out.push('}');
}

impl Plan {
    /// The plan as one JSON object on one line, exactly FORMAT.md's "The plan": `error`,
    /// `step`, `calls` (each with `call`, `action`, the action's members, `rule` and `why`) and
    /// `appends` (each event in its JSON form). What `stepjournal plan` prints and the
    /// conformance checks read.
    pub fn to_json(&self) -> String {
        to_json(self)
    }
}

fn to_json(plan: &Plan) -> String {
    let mut out = String::with_capacity(256);
    out.push_str("{\"error\":");
    match &plan.error {
        None => out.push_str("null"),
        Some(e) => {
            out.push_str("{\"kind\":");
            out.push_str(&string(e.kind()));
            out.push_str(",\"message\":");
            out.push_str(&string(&e.to_string()));
            out.push('}');
        }
    }
    out.push_str(",\"step\":");
    match plan.step {
        None => out.push_str("null"),
        Some(step) => out.push_str(&step.get().to_string()),
    }
    out.push_str(",\"calls\":[");
    for (i, c) in plan.calls.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        call_json(c, &mut out);
    }
    out.push_str("],\"appends\":[");
    for (i, e) in plan.appends.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&event_to_json(e));
    }
    out.push_str("]}");
    out
}
