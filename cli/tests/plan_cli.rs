//! `stepjournal plan --scenario` through the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use stepjournal::scenario::{check, expect_of};

fn bin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stepjournal")).args(args).output().expect("the binary runs")
}

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance/cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

fn plan_of(path: &Path) -> Output {
    bin(&["plan", "--scenario", path.to_str().unwrap()])
}

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stepjournal-plan-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn every_public_case_passes_through_the_binary() {
    let files = cases();
    assert!(files.len() >= 30);
    let mut failures = Vec::new();
    for file in &files {
        let out = plan_of(file);
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if !out.status.success() {
            failures.push(format!(
                "{name}: exit {:?}: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(stdout.lines().count(), 1, "{name}: the plan is one line");
        let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        for call in plan["calls"].as_array().unwrap() {
            assert!(call["rule"].is_string() && call["why"].is_string(), "{name}: {call}");
        }
        let expect = expect_of(&std::fs::read_to_string(file).unwrap()).unwrap();
        let diffs = check(&plan, &expect);
        if !diffs.is_empty() {
            failures.push(format!("{name}: {}", diffs.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn base() -> serde_json::Value {
    let text = std::fs::read_to_string(cases().into_iter().next().unwrap()).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn fails_naming(path: &Path, needles: &[&str]) {
    let out = plan_of(path);
    assert!(!out.status.success(), "{} was accepted", path.display());
    assert!(out.stdout.is_empty(), "nothing is printed on stdout");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in needles {
        assert!(stderr.contains(needle), "stderr {stderr:?} does not name {needle:?}");
    }
}

#[test]
fn an_unknown_event_type_exits_non_zero_naming_the_event() {
    let mut s = base();
    s["log"].as_array_mut().unwrap().push(serde_json::json!({"type": "teleported"}));
    let index = s["log"].as_array().unwrap().len() - 1;
    let path = scratch("unknown-type.json", &s.to_string());
    fails_naming(&path, &["teleported", &format!("event {index}"), "unknown-type.json"]);
}

#[test]
fn a_missing_member_exits_non_zero_naming_it() {
    let mut s = base();
    s["log"][2].as_object_mut().unwrap().remove("step");
    let path = scratch("missing-member.json", &s.to_string());
    fails_naming(&path, &["event 2", "step"]);
    let mut s = base();
    s.as_object_mut().unwrap().remove("entry");
    let path = scratch("missing-entry.json", &s.to_string());
    fails_naming(&path, &["`entry`"]);
}

#[test]
fn text_that_is_not_json_exits_non_zero() {
    let path = scratch("not-json.json", "{ \"tools\": ");
    fails_naming(&path, &["not valid JSON"]);
}

#[test]
fn a_missing_file_exits_non_zero_naming_it() {
    fails_naming(
        Path::new("/nonexistent/scenario.json"),
        &["cannot read", "/nonexistent/scenario.json"],
    );
}

#[test]
fn expect_is_never_read() {
    let file = &cases()[0];
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    s["expect"] = serde_json::json!({"error": "validation_error", "calls": {"nobody": {"action": "keep"}}, "appends": []});
    let path = scratch("wrong-expect.json", &s.to_string());
    let a = plan_of(file);
    let b = plan_of(&path);
    assert!(a.status.success() && b.status.success());
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn a_refused_entry_is_still_a_plan_and_exits_zero() {
    let file = cases().into_iter().find(|p| p.ends_with("30-retry-needs-failure.json")).unwrap();
    let out = plan_of(&file);
    assert!(out.status.success());
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["error"]["kind"], "validation_error");
    assert!(plan["error"]["message"].as_str().unwrap().contains("failed"));
}

#[test]
fn a_schema_that_does_not_compile_is_reported_and_its_arguments_fail() {
    let mut s = base();
    s["tools"]["set_preference"]["input_schema"] = serde_json::json!({"type": 12});
    let path = scratch("broken-schema.json", &s.to_string());
    let out = plan_of(&path);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("set_preference") && stderr.contains("does not compile"), "{stderr}");
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["calls"][0]["action"], "pair");
    assert_eq!(plan["calls"][0]["reason"], "outcome_unknown");
}

#[test]
fn help_shows_an_example() {
    let out = bin(&["plan", "--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("stepjournal plan --scenario"));
}
