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
        assert!(has(&stuck, &["mark bar run", "data-outcome=\"open\""]), "{stuck}");
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
