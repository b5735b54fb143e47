//! Who and why: `stop`, `answer`, `approve` and `deny` record the operator (`--as`, by default
//! `$STEPJOURNAL_OPERATOR`, `$USER` or `$LOGNAME`) and `--reason` with what they write
//! (`run_ended.by` for a stop, the wake's `run_started.by` for an answer or a decision), and
//! `show`, `calls`, `view` and `export` say them, escaped; hostile text is refused, nothing
//! written.

mod cli_support;

use cli_support::*;
use stepjournal_codec::{CallId, CallKind, Entry, Event, Replay, RunOutcome, Suspended};

/// Suspended on an approval (c1) and a client call (c2).
fn gated() -> Batches {
    vec![
        vec![run_started("run-1", Entry::NewTurn { message: "mail".into() }), message("go")],
        vec![
            reply(
                1,
                "cp-1",
                "",
                vec![
                    call("c1", "send_email", Replay::Unsafe, CallKind::Approval),
                    call("c2", "ask_subject", Replay::Unsafe, CallKind::Client),
                ],
            ),
            dispatch("c1", "d-1"),
            dispatch("c2", "d-2"),
        ],
        vec![
            Suspended { calls: vec![CallId::from("c1"), CallId::from("c2")] }.into(),
            ended("run-1", RunOutcome::Suspended),
        ],
    ]
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn a_stop_as_an_operator_with_a_reason_is_recorded_and_shown_by_show_calls_view_and_export() {
    for place in places() {
        let url = &place.url;
        append_session(&*place.open(), "s-stuck", &stuck(), T0);
        let said = bin_ok(
            &["stop", url, "s-stuck", "--as", "ana", "--reason", "customer called: \"stop it\""],
            0,
        );
        assert!(
            said.contains(r#""by":{"name":"ana","reason":"customer called: \"stop it\""}"#),
            "{}: {said}",
            place.name
        );
        let stored = events(&*place.open(), "s-stuck");
        let Some(Event::RunEnded(end)) = stored.last() else { panic!("{stored:?}") };
        let by = end.by.as_ref().unwrap();
        assert_eq!((by.name(), by.reason()), (Some("ana"), Some("customer called: \"stop it\"")));

        let show = bin_ok(&["show", url, "s-stuck"], 0);
        assert!(
            show.contains(r#"ended stopped (by ana, reason "customer called: \"stop it\"")"#),
            "{}: {show}",
            place.name
        );
        let show_json = json_lines(&bin_ok(&["show", url, "s-stuck", "--json"], 0));
        let end = show_json.iter().find(|l| l["type"] == "run_ended").unwrap();
        assert_eq!(end["by"]["name"], "ana");

        let calls = bin_ok(&["calls", url, "s-stuck"], 0);
        let header = calls.lines().next().unwrap();
        assert!(header.ends_with("BY"), "{calls}");
        assert!(
            calls
                .lines()
                .filter(|l| l.contains("paired run_stopped"))
                .all(|l| l.contains("by ana, reason")),
            "{calls}"
        );
        let rows = json_lines(&bin_ok(&["calls", url, "s-stuck", "--json"], 0));
        assert!(rows.iter().all(|r| r["by"]["name"] == "ana"), "{rows:?}");
        assert!(rows.iter().all(|r| r["by"]["reason"] == "customer called: \"stop it\""));

        let page = bin_ok(&["view", url, "s-stuck", "-o", "-"], 0);
        assert!(page.contains(r#"data-ended-by="ana""#), "{}", place.name);
        assert!(page.contains(r#"data-ended-reason="customer called: &quot;stop it&quot;""#));

        let export = bin_ok(&["export", url], 0);
        let line = json_lines(&export)
            .into_iter()
            .find(|l| {
                l["type"] == "run_ended" && l["session"] == "s-stuck" && l["outcome"] == "stopped"
            })
            .unwrap();
        assert_eq!(
            line["by"],
            serde_json::json!({"name": "ana", "reason": "customer called: \"stop it\""})
        );
    }
}

#[test]
fn an_answer_and_a_decision_sign_their_wake_with_the_operator_from_the_environment() {
    let place = file_place();
    let url = &place.url;
    append_session(&*place.open(), "s-gated", &gated(), T0);
    let out = bin_env(
        &["approve", url, "s-gated", "c1", "--reason", "looks right"],
        &[("USER", "bo"), ("LOGNAME", "root")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = bin_env(
        &["answer", url, "s-gated", "c2", "--output", "\"Q3\""],
        &[("STEPJOURNAL_OPERATOR", "oncall-cy"), ("USER", "bo")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let wakes: Vec<(Option<String>, Option<String>)> = events(&*place.open(), "s-gated")
        .into_iter()
        .filter_map(|e| match e {
            Event::RunStarted(e) if e.entry == Entry::Wake => Some(e.by.unwrap()),
            _ => None,
        })
        .map(|by| (by.name().map(str::to_owned), by.reason().map(str::to_owned)))
        .collect();
    assert_eq!(
        wakes,
        [(Some("bo".into()), Some("looks right".into())), (Some("oncall-cy".into()), None)]
    );
    let show = bin_ok(&["show", url, "s-gated"], 0);
    assert!(show.contains(r#"started: wake (by bo, reason "looks right")"#), "{show}");
    assert!(show.contains("started: wake (by oncall-cy)"), "{show}");
    let rows = json_lines(&bin_ok(&["calls", url, "s-gated", "--json"], 0));
    let by: Vec<&serde_json::Value> = rows.iter().map(|r| &r["by"]["name"]).collect();
    assert_eq!(by, ["bo", "oncall-cy"], "{rows:?}");
    let page = bin_ok(&["view", url, "s-gated", "-o", "-"], 0);
    assert!(
        page.contains(r#"data-by="oncall-cy""#) && page.contains(r#"data-reason="looks right""#)
    );
}

#[test]
fn a_dry_run_says_who_and_why_it_would_record_and_writes_nothing() {
    let place = file_place();
    let url = &place.url;
    append_session(&*place.open(), "s-stuck", &stuck(), T0);
    let said = bin_ok(&["stop", url, "s-stuck", "--dry-run", "--as", "ana", "--reason", "why"], 0);
    assert!(
        said.contains(r#"the run_ended would record who and why: by ana, reason "why""#),
        "{said}"
    );
    append_session(&*place.open(), "s-gated", &gated(), T0);
    let out = bin_env(&["deny", url, "s-gated", "c1", "--dry-run"], &[("LOGNAME", "dee")]);
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(said.contains("the run_started would record who and why: by dee"), "{said}");
    assert!(events(&*place.open(), "s-stuck").iter().all(|e| !matches!(e, Event::RunEnded(_))));
}

#[test]
fn with_no_operator_known_nothing_is_recorded_and_the_output_is_as_before() {
    let place = sqlite_place();
    let url = &place.url;
    append_session(&*place.open(), "s-stuck", &stuck(), T0);
    bin_ok(&["stop", url, "s-stuck"], 0);
    let stored = events(&*place.open(), "s-stuck");
    assert!(matches!(stored.last(), Some(Event::RunEnded(e)) if e.by.is_none()));
    assert!(!bin_ok(&["show", url, "s-stuck"], 0).contains("(by "));
    assert!(!bin_ok(&["calls", url, "s-stuck"], 0).lines().next().unwrap().contains("BY"));
    assert!(!bin_ok(&["export", url], 0).contains("\"by\""));
}

#[test]
fn hostile_names_and_reasons_are_refused_unprinted_and_nothing_is_written() {
    let place = file_place();
    let url = &place.url;
    append_session(&*place.open(), "s-stuck", &stuck(), T0);
    let before = events(&*place.open(), "s-stuck").len();
    let long = "x".repeat(2001);
    // Each case: the flags, the operator variables set, what the error names.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case<'_>; 4] = [
        (&["--as", "ana\u{1b}]0;pwned\u{7}"], &[], "U+001B"),
        (&["--as", "ana", "--reason", "line\nforged"], &[], "U+000A"),
        (&["--reason", &long], &[], "2001 bytes"),
        (&[], &[("USER", "eve\u{202e}gnp.exe")], "$USER"),
    ];
    for (flags, vars, says) in cases {
        let mut args = vec!["stop", url.as_str(), "s-stuck"];
        args.extend_from_slice(flags);
        let out = bin_env(&args, vars);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains(['\u{1b}', '\u{7}', '\u{202e}']) && !err.contains("pwned"), "{err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert_eq!(events(&*place.open(), "s-stuck").len(), before, "nothing written");
}
