//! `stepjournal view` on the fixture's sessions, every backend: the page's marks say what the
//! log says (waits, pairings, runs that failed, crashed or are still open, rewinds).

mod cli_support;

use cli_support::*;

fn page(url: &str, session: &str) -> String {
    bin_ok(&["view", url, session, "-o", "-"], 0)
}

fn has(html: &str, parts: &[&str]) -> bool {
    html.split("<div ").any(|t| {
        let tag = t.split('>').next().unwrap_or("");
        parts.iter().all(|p| tag.contains(p))
    })
}

#[test]
fn the_page_draws_each_fixture_session_as_its_log_says_on_every_backend() {
    for place in populated() {
        let url = &place.url;
        let suspended = page(url, "suspended");
        assert!(suspended.starts_with("<!DOCTYPE html>"), "{}", place.name);
        assert!(has(&suspended, &["wait wait-client", "data-call=\"c1\""]), "{suspended}");
        assert!(has(&suspended, &["mark bar run", "data-outcome=\"suspended\""]));
        let stopped = page(url, "stopped");
        assert!(has(&stopped, &["pairing", "data-reason=\"run_stopped\"", "data-call=\"c1\""]));
        let stuck = page(url, "stuck");
        // The defect: the run was drawn "open" while `sessions` called the session crashed.
        let listed = bin_ok(&["sessions", url, "--json"], 0);
        let line = listed.lines().find(|l| l.contains("\"stuck\"")).unwrap();
        assert!(line.contains("\"state\":\"crashed\""), "{}: {line}", place.name);
        assert!(has(&stuck, &["mark bar run", "data-outcome=\"crash\""]), "{stuck}");
        assert!(stuck.contains("<header data-state=\"crashed\">"), "{}", place.name);
        assert!(!has(&stuck, &["data-outcome=\"open\""]), "{}", place.name);
        assert!(has(&stuck, &["attempt cut", "data-call=\"c1\"", "data-attempt=\"1\""]));
        assert!(has(&stuck, &["tick chunk", "data-call=\"c1\""]));
        let retried = page(url, "retried");
        assert!(has(&retried, &["mark bar run", "data-outcome=\"failed\""]));
        assert!(has(&retried, &["tick rewound"]));
        assert!(has(&retried, &["attempt ok", "data-call=\"c1\"", "data-attempt=\"2\""]));
        // An id is text on the page, never markup.
        assert!(!retried.contains("<script>alert"), "{}", place.name);
    }
    let place = file_place();
    populate(&*place.open());
    let out = bin(&["view", &place.url, "nobody", "-o", "-"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn ids_and_texts_are_escaped_on_the_page() {
    use stepjournal_codec::{CallKind, Entry, Replay};
    let place = file_place();
    let store = place.open();
    let evil = "<script>alert(1)</script>\"'&";
    let batches = vec![
        vec![run_started("run-1", Entry::NewTurn { message: evil.into() }), message(evil)],
        vec![
            reply(1, "cp-1", evil, vec![call("c1", evil, Replay::Safe, CallKind::Tool)]),
            dispatch("c1", "d-1"),
        ],
        vec![attempt("c1", 1), chunk("c1", 1, evil)],
    ];
    append_session(&*store, "evil", &batches, T0);
    drop(store);
    let html = page(&place.url, "evil");
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
}

#[test]
fn stored_controls_and_bidi_overrides_are_escaped_on_the_page_and_in_the_confirmation() {
    // The defects: the confirmation line printed a stored id raw (ESC ] 0 ; X BEL retitled the
    // terminal), and the page showed bidirectional controls raw (`c-\u{202e}evil-rtl\u{202c}`
    // read as another id).
    use stepjournal_codec::{CallKind, Entry, Replay};
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let session = "s-\u{1b}]0;X\u{7}-\u{202e}evil-rtl\u{202c}";
    let call_id = "c-\u{202e}evil-rtl\u{202c}";
    let batches = vec![
        vec![run_started("run-1", Entry::NewTurn { message: "go\u{202e}x".into() }), message("go")],
        vec![
            reply(1, "cp-1", "t", vec![call(call_id, "tool", Replay::Safe, CallKind::Tool)]),
            dispatch(call_id, "d-1"),
        ],
        vec![attempt(call_id, 1)],
    ];
    write_file_journal_unchecked(&journal, &[(session.to_owned(), batches)], T0);
    let url = format!("file:{}", journal.display());
    let html = page(&url, session);
    for c in ['\u{1b}', '\u{7}', '\u{202e}', '\u{202c}'] {
        assert!(!html.contains(c), "U+{:04X} reached the page raw", c as u32);
    }
    assert!(html.contains("c-\\u{202e}evil-rtl\\u{202c}"), "the call id shown escaped");
    // The marks' JSON is still JSON (the same value), for the details panel.
    let json = html.split("data-json=\"").nth(1).unwrap().split('"').next().unwrap();
    let json = json.replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&");
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["session"], session);

    let out = dir.path().join("page.html");
    let said = bin_ok(&["view", &url, session, "-o", out.to_str().unwrap()], 0);
    assert!(!said.contains('\u{1b}') && !said.contains('\u{202e}'), "{said:?}");
    assert!(said.contains("\\u{1b}]0;X\\u{7}"), "{said:?}");
}

#[test]
fn a_page_that_cannot_be_written_exits_74_naming_the_file() {
    // The defect: `view -o` to an unwritable file exited 2, where every failure to write the
    // output exits 74.
    let place = file_place();
    populate(&*place.open());
    let out = place.path().join("no-such-dir").join("page.html");
    let run = bin(&["view", &place.url, "stuck", "-o", out.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(74), "{}", stderr(&run));
    assert!(stderr(&run).contains("no-such-dir"), "{}", stderr(&run));
}

#[test]
fn each_call_has_an_arrow_to_the_nearest_call_it_waits_behind_in_each_of_its_lanes() {
    // The defect: a lane showed neither its call's policy nor the call it waits behind.
    use stepjournal_codec::{CallKind, Entry, Replay};
    let place = file_place();
    let store = place.open();
    let mut calls = vec![
        call("c1", "t", Replay::Safe, CallKind::Tool),
        call("c2", "t", Replay::Unsafe, CallKind::Tool),
        call("c3", "t", Replay::Safe, CallKind::Tool),
        call("c4", "t", Replay::Safe, CallKind::Client),
    ];
    calls[0].sequential = true;
    calls[1].group = Some("g".into());
    calls[2].sequential = true;
    calls[2].group = Some("g".into());
    calls[3].group = Some("g".into());
    let batches = vec![
        vec![run_started("run-1", Entry::NewTurn { message: "go".into() }), message("go")],
        vec![reply(1, "cp-1", "t", calls)],
    ];
    append_session(&*store, "chain", &batches, T0);
    drop(store);
    let html = page(&place.url, "chain");
    let arrow = |from: &str, to: &str, via: &str| {
        let parts = [
            "seg arrow-from".to_owned(),
            format!("data-from=\"{from}\""),
            format!("data-to=\"{to}\""),
            format!("data-via=\"{via}\""),
        ];
        html.split("<span ").filter(|t| parts.iter().all(|p| t.contains(p.as_str()))).count()
    };
    assert_eq!(arrow("c3", "c2", "group `g`"), 1, "{html}");
    assert_eq!(arrow("c3", "c1", "the sequential chain"), 1, "{html}");
    assert_eq!(arrow("c4", "c3", "group `g`"), 1, "the nearest in the group, not c2");
    assert_eq!(arrow("c4", "c2", "group `g`"), 0);
    assert_eq!(html.matches("seg arrow-from").count(), 3, "{html}");
    // Arrows over the same rows are drawn in columns of their own.
    let lefts: Vec<&str> = html
        .split("<span class=\"seg arrow-from\"")
        .skip(1)
        .map(|t| t.split("left:").nth(1).unwrap().split("px").next().unwrap())
        .collect();
    let mut distinct = lefts.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "{lefts:?}");
    // Each lane says its kind, policy and order.
    assert!(has(
        &html,
        &["row lane", "data-call=\"c2\"", "data-policy=\"unsafe\"", "data-order=\"group g\""]
    ));
    assert!(has(&html, &["row lane", "data-call=\"c3\"", "data-order=\"group g, sequential\""]));
    assert!(has(&html, &["row lane", "data-call=\"c4\"", "data-kind=\"client\""]));
    // Before any recovery, what a wake would do to each, from the plan.
    assert!(html.contains("<tr class=\"planned action-await\" data-call=\"c4\""), "{html}");
}
