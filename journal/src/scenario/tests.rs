#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "a test fails by panicking, on the inputs it built itself"
)]

use serde_json::{Value, json};

use super::*;

fn scenario(log: Value, entry: Value) -> String {
    json!({
        "name": "n",
        "tools": {"read": {"replay": "safe"}},
        "log": log,
        "entry": entry,
        "expect": {"error": null, "calls": {}, "appends": ["run_started"]}
    })
    .to_string()
}

fn error_of(text: &str) -> String {
    Scenario::parse(text).unwrap_err().to_string()
}

#[test]
fn a_well_formed_scenario_plans_through_the_fold() {
    let text = scenario(
        json!([
            {"type": "reply_committed", "step": 1, "checkpoint": "cp-1",
             "calls": [{"call": "c1", "tool": "read", "replay": "safe"}]},
            {"type": "dispatch_minted", "call": "c1", "dispatch": "d1"},
            {"type": "attempt_started", "call": "c1", "attempt": 1}
        ]),
        json!({"kind": "wake"}),
    );
    let s = Scenario::parse(&text).unwrap();
    assert_eq!(s.config.max_bodies(), 3);
    let plan: Value = serde_json::from_str(&s.plan().to_json()).unwrap();
    assert_eq!(
        plan["calls"][0],
        json!({"call": "c1", "action": "run", "dispatch": "d1", "attempt": 2,
               "rule": "recovery.safe_replay", "why": plan["calls"][0]["why"].clone()})
    );
    assert_eq!(plan["appends"][0]["run"], "run-1");
}

#[test]
fn an_unknown_event_type_names_its_index() {
    let text = scenario(
        json!([{"type": "message", "role": "user", "text": "a"}, {"type": "teleported"}]),
        json!({"kind": "wake"}),
    );
    let e = error_of(&text);
    assert!(e.contains("`log`") && e.contains("event 1") && e.contains("teleported"), "{e}");
}

#[test]
fn a_missing_member_is_named() {
    let text =
        scenario(json!([{"type": "attempt_started", "call": "c1"}]), json!({"kind": "wake"}));
    let e = error_of(&text);
    assert!(e.contains("event 0") && e.contains("attempt"), "{e}");
    let e = error_of(r#"{"tools": {}, "log": []}"#);
    assert!(e.contains("`entry`"), "{e}");
    let e = error_of(r#"{"log": [], "entry": {"kind": "wake"}}"#);
    assert!(e.contains("`tools`"), "{e}");
}

#[test]
fn a_malformed_entry_or_max_bodies_is_named() {
    let e = error_of(&scenario(json!([]), json!({"kind": "resume"})));
    assert!(e.contains("`entry`") && e.contains("mode"), "{e}");
    let e = error_of(&scenario(json!([]), json!({"kind": "jump"})));
    assert!(e.contains("`entry`") && e.contains("jump"), "{e}");
    let text = r#"{"tools": {}, "max_bodies": 0, "log": [], "entry": {"kind": "wake"}}"#;
    assert!(error_of(text).contains("max_bodies"));
    let text = r#"{"tools": {}, "max_bodies": 2.5, "log": [], "entry": {"kind": "wake"}}"#;
    assert!(error_of(text).contains("max_bodies"));
    let text = r#"{"tools": {}, "log": {}, "entry": {"kind": "wake"}}"#;
    assert!(error_of(text).contains("`log` must be an array"));
}

#[test]
fn text_that_is_not_json_is_refused_with_its_line() {
    let e = error_of("{\n\"tools\": {},\n oops }");
    assert!(e.contains("not valid JSON") && e.contains("line 3"), "{e}");
    assert!(error_of("[1]").contains("must be a JSON object"));
}

#[test]
fn expect_is_never_read() {
    let a = scenario(json!([]), json!({"kind": "wake"}));
    let mut b: Value = serde_json::from_str(&a).unwrap();
    b["expect"] = json!({"error": "validation_error", "calls": {"zz": {}}, "appends": 7});
    let plan_a = Scenario::parse(&a).unwrap().plan().to_json();
    let plan_b = Scenario::parse(&b.to_string()).unwrap().plan().to_json();
    assert_eq!(plan_a, plan_b);
}

#[test]
fn the_checker_passes_a_matching_plan_and_names_each_difference() {
    let plan = json!({"error": null, "step": 1,
        "calls": [{"call": "c1", "action": "pair", "reason": "outcome_unknown"}],
        "appends": [{"type": "run_started"}, {"type": "paired", "call": "c1",
                     "reason": "outcome_unknown", "partial": "ab"}]});
    let expect = json!({"error": null,
        "calls": {"c1": {"action": "pair", "reason": "outcome_unknown"}},
        "appends": ["run_started", "paired"],
        "paired": {"c1": {"partial": "ab"}}});
    assert_eq!(check(&plan, &expect), Vec::<String>::new());
    let wrong = json!({"error": "validation_error",
        "calls": {"c1": {"action": "run"}, "c2": {}},
        "appends": ["run_started"],
        "paired": {"c1": {"partial": "x"}}});
    let diffs = check(&plan, &wrong);
    assert_eq!(diffs.len(), 5, "{diffs:#?}");
    assert!(diffs.iter().any(|d| d.contains("`action` expected \"run\"")));
}
