//! `calls`, the new `sessions` columns and options, and `show --follow`, on every backend.

mod cli_support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use cli_support::*;
use stepjournal_codec::{Entry, PairReason, RunOutcome};

#[test]
fn calls_prints_each_call_with_its_status_and_rule_the_same_on_every_backend() {
    for place in populated() {
        let store = place.open();
        // A pairing written by format version 2 carries its rule.
        let mut paired_v2 = paired("c1", PairReason::OutcomeUnknown, "charging 42.00 EUR");
        if let stepjournal_codec::Event::Paired(p) = &mut paired_v2 {
            p.rule = Some("recovery.outcome_unknown".into());
        }
        let mut woken = stuck();
        woken.push(vec![run_started("run-2", Entry::Wake), paired_v2]);
        append_session(&*store, "woken", &woken, T0);
        drop(store);
        for session in ["stuck", "woken", "retried", "suspended", "stopped"] {
            let table = bin_ok(&["calls", &place.url, session], 0);
            golden(&format!("calls-{session}.txt"), &mask_call_ages(&table));
        }
        let json = bin_ok(&["calls", &place.url, "woken", "--json"], 0);
        let rows: Vec<serde_json::Value> =
            json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(rows[0]["status"], "paired outcome_unknown", "{}", place.name);
        assert_eq!(rows[0]["rule"], "recovery.outcome_unknown");
        assert_eq!(rows[1]["status"], "in flight");
        assert_eq!(rows[1]["rule"], "wake: recovery.safe_replay");
        assert_eq!(rows[1]["dispatch"], "d-2");
        assert!(rows[1]["age_ms"].as_u64().unwrap() > 0);
        let shown = bin_ok(&["show", &place.url, "woken"], 0);
        assert!(
            shown.contains("c1 paired outcome_unknown by rule recovery.outcome_unknown"),
            "{shown}"
        );
    }
}

#[test]
fn sessions_sorts_by_age_or_events_and_limits_on_every_backend() {
    for place in populated() {
        let rows = |args: &[&str]| -> Vec<String> {
            let mut all = vec!["sessions", place.url.as_str(), "--json"];
            all.extend_from_slice(args);
            bin_ok(&all, 0)
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    v["session"].as_str().unwrap().to_owned()
                })
                .collect()
        };
        // The fixture's sessions were last appended in this order: failed first.
        assert_eq!(
            rows(&["--sort", "age", "--limit", "2"]),
            ["failed", "finished"],
            "{}",
            place.name
        );
        assert_eq!(rows(&["--sort", "events", "--limit", "3"]), ["retried", "finished", "stopped"]);
        assert_eq!(rows(&["--limit", "1"]), ["failed"]);
        assert_eq!(rows(&["--state", "crashed"]), ["stuck"]);
        assert_eq!(rows(&["--state", "running"]), Vec::<String>::new());
    }
}

/// Waits for the child to end, killing it (and failing) if it has not after a minute.
fn wait_bounded(child: &mut std::process::Child) -> std::process::ExitStatus {
    for _ in 0..600 {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("show --follow did not end within a minute");
}

#[test]
fn show_follow_sees_the_events_another_process_appends_on_every_backend() {
    for place in places() {
        let store = place.open();
        append_session(&*store, "live", &vec![vec![run_started("run-1", Entry::Wake)]], T0);
        let mut child = Command::new(env!("CARGO_BIN_EXE_stepjournal"))
            .args(["show", &place.url, "live", "--follow", "--interval", "20", "--until-ended"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Give the follower a first screen, then append while it follows.
        std::thread::sleep(Duration::from_millis(200));
        let batches = [
            vec![run_started("run-1", Entry::Wake)],
            vec![message("a note appended while followed")],
            vec![ended("run-1", RunOutcome::Completed)],
        ];
        for (i, batch) in batches.iter().enumerate().skip(1) {
            let events: Vec<_> = batch
                .iter()
                .map(|e| {
                    stepjournal_codec::Stamped::at(stepjournal_codec::UnixMillis(T0), e.clone())
                })
                .collect();
            store
                .append(
                    &stepjournal_codec::SessionId::new("live").unwrap(),
                    stepjournal_codec::Seq(i as u64),
                    &events,
                    stepjournal_backends::Durability::Synced,
                )
                .unwrap();
            std::thread::sleep(Duration::from_millis(100));
        }
        let status = wait_bounded(&mut child);
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(status.success(), "{}: {err}", place.name);
        assert!(out.contains("a note appended while followed"), "{}: {out}", place.name);
        assert!(out.contains("run run-1 ended completed"), "{}: {out}", place.name);
        assert_eq!(out.matches("a note appended while followed").count(), 1, "{out}");
    }
}

#[test]
fn long_commands_draw_no_progress_when_standard_error_is_piped() {
    let place = file_place();
    populate(&*place.open());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("all.jsonl");
    let exported = std::process::Command::new(env!("CARGO_BIN_EXE_stepjournal"))
        .args(["export", &place.url])
        .output()
        .unwrap();
    assert!(exported.status.success() && exported.stderr.is_empty(), "{}", stderr(&exported));
    std::fs::write(&file, &exported.stdout).unwrap();
    let target = sqlite_place();
    let salvaged = file_place();
    for args in [
        vec!["import", file.to_str().unwrap(), "--to", target.url.as_str()],
        vec!["verify", place.url.as_str()],
        vec!["salvage", place.url.as_str(), "--to", salvaged.url.as_str()],
    ] {
        let out = bin(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(out.stderr.is_empty(), "{args:?} drew on a pipe: {:?}", stderr(&out));
    }
}
