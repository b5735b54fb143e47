//! `stepjournal view` rendered in a real browser: the demo's journal, drawn by headless
//! Chromium (Debian's `chromium`), screenshotted and checked through its DOM: every call's lane,
//! every attempt, the crashed run and the `outcome_unknown` pairing with its rule. Without
//! Chromium the browser half says it is skipped and why; the page itself is checked either way.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use stepjournal_backends::JournalStore;
use stepjournal_backends::file::FileStore;
use stepjournal_codec::{Event, SessionId};

fn bin(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_stepjournal")).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Runs the browser, killed (and the test failed) if it has not finished within two minutes.
fn chromium(args: &[String]) -> String {
    let mut child = Command::new("chromium")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut out, &mut text).unwrap();
        text
    });
    for _ in 0..1200 {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium {args:?}: {status}");
            return reader.join().unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("chromium did not finish within two minutes: {args:?}");
}

fn has_chromium() -> Result<(), String> {
    match Command::new("chromium").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!("`chromium --version` exited {}", out.status)),
        Err(e) => {
            Err(format!("no `chromium` on PATH ({e}); `apt-get install -y chromium` adds it"))
        }
    }
}

/// Every opening `<div` tag of the page (or DOM) holding all of `parts`.
fn tags<'a>(html: &'a str, parts: &[&str]) -> Vec<&'a str> {
    html.split("<div ")
        .skip(1)
        .map(|t| t.split('>').next().unwrap_or(""))
        .filter(|t| parts.iter().all(|p| t.contains(p)))
        .collect()
}

/// What the page (or the browser's DOM of it) must show of the demo's session.
fn check(html: &str, events: &[Event], what: &str) {
    let mut calls: Vec<String> = Vec::new();
    for e in events {
        if let Event::ReplyCommitted(r) = e {
            calls.extend(r.calls.iter().map(|c| c.call.to_string()));
        }
    }
    assert_eq!(calls, ["c1", "c2", "c3", "c4"], "{what}");
    for c in &calls {
        let lane = format!("data-call=\"{c}\"");
        assert_eq!(tags(html, &["row lane", &lane]).len(), 1, "{what}: lane of {c}");
    }
    let mut attempts = 0;
    for e in events {
        if let Event::AttemptStarted(a) = e {
            attempts += 1;
            let call = format!("data-call=\"{}\"", a.call);
            let n = format!("data-attempt=\"{}\"", a.attempt);
            assert_eq!(
                tags(html, &["mark bar attempt", &call, &n]).len(),
                1,
                "{what}: attempt {} of {}",
                a.attempt,
                a.call
            );
        }
    }
    assert_eq!(tags(html, &["mark bar attempt"]).len(), attempts, "{what}");
    let unknown = tags(
        html,
        &[
            "pairing",
            "data-call=\"c3\"",
            "data-reason=\"outcome_unknown\"",
            "data-rule=\"recovery.outcome_unknown\"",
        ],
    );
    assert_eq!(unknown.len(), 1, "{what}: the outcome_unknown pairing with its rule");
    assert_eq!(
        tags(html, &["mark bar run", "data-outcome=\"crash\""]).len(),
        1,
        "{what}: the crash"
    );
    assert_eq!(tags(html, &["mark bar run", "data-outcome=\"completed\""]).len(), 1, "{what}");
}

#[test]
fn the_demos_timeline_renders_in_headless_chromium_with_every_lane_attempt_and_pairing() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("demo");
    bin(&["demo", "--dir", journal.to_str().unwrap()]);
    let url = format!("file:{}", journal.display());
    let page = dir.path().join("session.html");
    bin(&["view", &url, "demo-1", "-o", page.to_str().unwrap()]);
    let events: Vec<Event> = FileStore::open_read_only(&journal)
        .unwrap()
        .read_all(&SessionId::new("demo-1").unwrap())
        .unwrap()
        .into_iter()
        .map(|r| r.event)
        .collect();
    let html = std::fs::read_to_string(&page).unwrap();
    check(&html, &events, "the page");
    // Self-contained: nothing is fetched.
    for fetch in ["<link", "src=", "http://", "https://", "@import", "url("] {
        assert!(!html.contains(fetch), "the page fetches something: {fetch}");
    }

    if let Err(why) = has_chromium() {
        println!("skipped: the browser half of this test needs Chromium: {why}");
        return;
    }
    let profile = dir.path().join("profile");
    let common = |extra: &str| -> Vec<String> {
        vec![
            "--headless".into(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--hide-scrollbars".into(),
            format!("--user-data-dir={}", profile.display()),
            "--window-size=1400,760".into(),
            extra.to_owned(),
            format!("file://{}", page.display()),
        ]
    };
    let dom = chromium(&common("--dump-dom"));
    assert!(dom.contains("<html"), "{dom}");
    check(&dom, &events, "the browser's DOM");
    // The details panel, filled by the page's script: `#seq=N` shows the event at seq N, as a
    // click on its mark does. Here the email's pairing: its JSON, with the rule.
    let at = events
        .iter()
        .position(|e| matches!(e, Event::Paired(p) if p.call.as_str() == "c3"))
        .unwrap();
    let link = |extra: &str| {
        let mut args = common(extra);
        let url = args.pop().unwrap();
        args.push(format!("{url}#seq={at}"));
        args
    };
    let dom = chromium(&link("--dump-dom"));
    let panel = dom.split("id=\"details\">").nth(1).unwrap().split("</pre>").next().unwrap();
    assert!(panel.contains("paired outcome_unknown by rule recovery.outcome_unknown"), "{panel}");
    assert!(
        panel.contains("&quot;type&quot;: &quot;paired&quot;")
            || panel.contains("\"type\": \"paired\""),
        "{panel}"
    );
    let shot = dir.path().join("view.png");
    chromium(&link(&format!("--screenshot={}", shot.display())));
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{}", png.len());
    if let Some(keep) = std::env::var_os("STEPJOURNAL_VIEW_PNG") {
        std::fs::copy(&shot, Path::new(&keep)).unwrap();
    }
}
