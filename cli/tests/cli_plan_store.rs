//! `stepjournal plan STORE SESSION --entry ENTRY`: a dry run of recovery on stored sessions,
//! on every backend in the build.

mod cli_support;

use cli_support::*;
use serde_json::Value;

fn plan_json(url: &str, session: &str, entry: &str, extra: &[&str]) -> Value {
    let mut args = vec!["plan", url, session, "--entry", entry, "--json"];
    args.extend_from_slice(extra);
    let text = bin_ok(&args, 0);
    assert_eq!(text.lines().count(), 1, "{text}");
    serde_json::from_str(&text).unwrap()
}

fn call<'a>(plan: &'a Value, id: &str) -> &'a Value {
    plan["calls"].as_array().unwrap().iter().find(|c| c["call"] == id).unwrap()
}

fn types(plan: &Value) -> Vec<String> {
    plan["appends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_wake_of_the_stuck_session_runs_the_safe_call_and_pairs_the_unsafe_one() {
    for place in populated() {
        let plan = plan_json(&place.url, "stuck", "wake", &[]);
        assert_eq!(plan["error"], Value::Null, "{}", place.name);
        assert_eq!(plan["step"], 1);
        let c1 = call(&plan, "c1");
        assert_eq!(
            (c1["action"].as_str(), c1["reason"].as_str()),
            (Some("pair"), Some("outcome_unknown"))
        );
        assert_eq!(c1["rule"], "recovery.outcome_unknown");
        let c2 = call(&plan, "c2");
        assert_eq!((c2["action"].as_str(), c2["attempt"].as_u64()), (Some("run"), Some(2)));
        assert_eq!(
            (c2["dispatch"].as_str(), c2["rule"].as_str()),
            (Some("d-2"), Some("recovery.safe_replay"))
        );
        assert_eq!(types(&plan), ["run_started", "paired"]);
        assert_eq!(plan["appends"][1]["partial"], "charging 42.00 EUR");
    }
}

#[test]
fn the_human_form_explains_each_call_and_says_how_tools_were_taken() {
    let place = file_place();
    populate(&*place.open());
    let text = bin_ok(&["plan", &place.url, "stuck", "--entry", "wake"], 0);
    golden("plan-stuck-wake.txt", &text.replace(&place.url, "STORE"));
    assert!(text.contains("no --tools given"), "{text}");
    // The explanation alone: each call's tool and rule, no JSON line under it.
    assert!(text.contains("c1  charge_card: ") && text.contains("rule recovery."), "{text}");
    assert!(!text.lines().any(|l| l.starts_with('{')), "{text}");
    assert!(plan_json(&place.url, "stuck", "wake", &[])["calls"].is_array());
    let out = bin(&["plan", &place.url, "stuck", "--entry", "wake", "--json"]);
    assert!(stderr(&out).contains("no --tools given"), "{}", stderr(&out));
}

#[test]
fn the_registry_file_decides_when_given() {
    let place = file_place();
    populate(&*place.open());
    let dir = tempfile::tempdir().unwrap();
    // set_preference is unsafe now, and charge_card was removed.
    let tools = dir.path().join("tools.json");
    std::fs::write(&tools, r#"{"set_preference": {"replay": "unsafe"}, "search_restaurants": {}}"#)
        .unwrap();
    let plan = plan_json(&place.url, "stuck", "wake", &["--tools", tools.to_str().unwrap()]);
    assert_eq!(call(&plan, "c2")["reason"], "outcome_unknown");
    // A schema the saved arguments fail makes a call with no body `not_started`.
    std::fs::write(
        &tools,
        r#"{"ask_user": {"input_schema": {"type": "object", "required": ["date"]}}}"#,
    )
    .unwrap();
    let plan = plan_json(&place.url, "suspended", "wake", &["--tools", tools.to_str().unwrap()]);
    assert_eq!(call(&plan, "c1")["action"], "await", "a client call awaits whatever its schema");
    std::fs::write(&tools, r#"{"set_preference": {"replay": "maybe"}}"#).unwrap();
    let out =
        bin(&["plan", &place.url, "stuck", "--entry", "wake", "--tools", tools.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("tools.json") && stderr(&out).contains("maybe"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn entries_are_json_or_bare_words() {
    let place = file_place();
    populate(&*place.open());
    let stop = plan_json(&place.url, "stuck", "stop", &[]);
    assert_eq!(types(&stop), ["paired", "paired", "step_commit", "run_ended"]);
    assert_eq!(call(&stop, "c2")["reason"], "run_stopped");
    let redirect =
        plan_json(&place.url, "stuck", r#"{"kind":"new_turn","message":"cancel that"}"#, &[]);
    assert_eq!(types(&redirect), ["run_started", "paired", "paired", "step_commit", "message"]);
    let resume = plan_json(&place.url, "stuck", "resume", &[]);
    assert_eq!(resume["calls"], plan_json(&place.url, "stuck", "wake", &[])["calls"]);
    assert_eq!(
        resume["appends"][0]["entry"],
        serde_json::json!({"kind": "resume", "mode": "continue"})
    );
    let retry = plan_json(&place.url, "failed", "retry", &[]);
    assert_eq!(retry["error"], Value::Null);
    assert_eq!(types(&retry), ["run_started", "rewound"]);
    assert_eq!(call(&retry, "c1")["attempt"], 2);
    let refused = plan_json(&place.url, "stuck", "retry", &[]);
    assert_eq!(refused["error"]["kind"], "validation_error");
    let out = bin(&["plan", &place.url, "stuck", "--entry", "nap"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--entry") && stderr(&out).contains("`nap`"), "{}", stderr(&out));
    let out = bin(&["plan", &place.url, "stuck", "--entry", r#"{"kind":"resume"}"#]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("mode"), "{}", stderr(&out));
}

#[test]
fn planning_writes_nothing() {
    for place in populated() {
        let before = bin_ok(&["export", &place.url], 0);
        let files_before = snapshot(&place);
        for entry in ["wake", "stop", "retry", r#"{"kind":"new_turn","message":"x"}"#] {
            for session in ["stuck", "failed", "suspended"] {
                bin_ok(&["plan", &place.url, session, "--entry", entry], 0);
            }
        }
        assert_eq!(bin_ok(&["export", &place.url], 0), before, "{}", place.name);
        assert_eq!(snapshot(&place), files_before, "{}: the journal's files changed", place.name);
    }
}

/// A file journal's files and their bytes (empty for other backends).
fn snapshot(place: &Place) -> Vec<(String, Vec<u8>)> {
    if place.name != "file" {
        return Vec::new();
    }
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(place.path())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn plan_on_a_missing_session_or_without_an_entry_is_an_error() {
    let place = file_place();
    populate(&*place.open());
    let out = bin(&["plan", &place.url, "nobody", "--entry", "wake"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`nobody`"), "{}", stderr(&out));
    let out = bin(&["plan", &place.url, "stuck"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--entry"), "{}", stderr(&out));
    let out = bin(&["plan"]);
    assert_eq!(out.status.code(), Some(2));
}
