//! `stepjournal view` rendered in a real browser, before and after recovery: the demo's session
//! left as the crash left it (`demo --no-recover`), then woken through the library. Each page is
//! drawn by headless Chromium (Debian's `chromium`), checked through its DOM and screenshotted
//! (the paths are printed; `target/tmp/timeline-before.png` and `timeline-after.png`). Without
//! Chromium the browser half says it is skipped and why; the pages themselves are checked
//! either way.
//!
//! The defects: before recovery the page drew the crashed run "open" (while `sessions` said
//! crashed) and its decisions table was empty; a lane did not show its call's policy, nor the
//! call it waits behind; arguments and partial output were only in a click's JSON; the only
//! axis was the sequence.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use stepjournal::{Journal, JournalOptions, Reply};
use stepjournal_backends::JournalStore;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_codec::{
    CallId, CheckpointId, Entry, Event, RawJson, RunId, RunOutcome, SessionId,
};
use stepjournal_recovery::{Config, MemoryRegistry, NewRun, fold, plan};

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

/// Every opening `<NAME ` tag of the page (or DOM) holding all of `parts`.
fn tags<'a>(html: &'a str, name: &str, parts: &[&str]) -> Vec<&'a str> {
    html.split(&format!("<{name} "))
        .skip(1)
        .map(|t| t.split('>').next().unwrap_or(""))
        .filter(|t| parts.iter().all(|p| t.contains(p)))
        .collect()
}

fn divs<'a>(html: &'a str, parts: &[&str]) -> Vec<&'a str> {
    tags(html, "div", parts)
}

/// The text of the first element whose opening tag holds all of `parts`, to its closing tag
/// (elements of its name nested in it counted), tags removed.
fn text_after(html: &str, name: &str, parts: &[&str]) -> String {
    let Some(tag) = tags(html, name, parts).first().copied() else {
        panic!("no <{name}> holding {parts:?}")
    };
    let start = html.find(tag).unwrap() + tag.len() + 1;
    let (open, close) = (format!("<{name}"), format!("</{name}>"));
    let mut depth = 1;
    let mut at = start;
    while depth > 0 {
        let next_open = html[at..].find(&open).map(|i| i + at);
        let next_close = html[at..].find(&close).map(|i| i + at).unwrap();
        match next_open {
            Some(o) if o < next_close => {
                depth += 1;
                at = o + open.len();
            }
            _ => {
                depth -= 1;
                at = next_close + close.len();
            }
        }
    }
    let mut text = String::new();
    let mut inside = false;
    for c in html[start..at].chars() {
        match c {
            '<' => inside = true,
            '>' => inside = false,
            c if !inside => text.push(c),
            _ => {}
        }
    }
    text.replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}

/// The demo's tools as the demo's recovery has them (its registry).
fn registry() -> MemoryRegistry {
    use stepjournal_codec::Replay;
    MemoryRegistry::new()
        .with_tool("search_flights", Replay::Safe)
        .with_tool("set_preference", Replay::Safe)
        .with_tool("send_email", Replay::Unsafe)
        .with_tool("archive_email", Replay::Safe)
}

fn events(journal: &Path) -> Vec<Event> {
    FileStore::open_read_only(journal)
        .unwrap()
        .read_all(&SessionId::new("demo-1").unwrap())
        .unwrap()
        .into_iter()
        .map(|r| r.event)
        .collect()
}

/// What `sessions --json` says of demo-1's state.
fn sessions_state(url: &str) -> String {
    let out = bin(&["sessions", url, "--json"]);
    let line = out.lines().find(|l| l.contains("\"demo-1\"")).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["state"].as_str().unwrap().to_owned()
}

/// What both pages show, in the page and in the browser's DOM: a lane per call with its kind
/// and policy, its order, the arrow from c4 to c3 (group `email`), its arguments, the session's
/// state as `sessions` says it, the seq and time axes.
fn check_common(html: &str, events: &[Event], state: &str, what: &str) {
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| if let Event::ReplyCommitted(r) = e { Some(r) } else { None })
        .flat_map(|r| r.calls.iter())
        .collect();
    assert_eq!(calls.len(), 4, "{what}");
    for c in &calls {
        let lane = format!("data-call=\"{}\"", c.call);
        let kind = format!("data-kind=\"{}\"", c.kind.as_str());
        let policy = format!("data-policy=\"{}\"", c.replay.as_str());
        assert_eq!(
            divs(html, &["row lane", &lane, &kind, &policy]).len(),
            1,
            "{what}: lane {lane}"
        );
        // Kind and policy are drawn in the label, the arguments beside the track.
        let label = text_after(html, "div", &["row lane", &lane]);
        assert!(label.contains(c.replay.as_str()) && label.contains(c.kind.as_str()), "{label}");
        assert!(label.contains(c.args.get()), "{what}: the arguments of {}: {label}", c.call);
    }
    assert_eq!(
        divs(html, &["row lane", "data-call=\"c3\"", "data-order=\"group email\""]).len(),
        1
    );
    // The arrow from c4 to the call it waits behind, c3, in group `email`: its tail in c4's
    // row, its head in c3's.
    let arrow = ["data-from=\"c4\"", "data-to=\"c3\"", "data-via=\"group `email`\""];
    assert_eq!(tags(html, "span", &[&["seg arrow-from"][..], &arrow].concat()).len(), 1, "{what}");
    assert_eq!(tags(html, "span", &[&["seg arrow-to"][..], &arrow].concat()).len(), 1, "{what}");
    assert_eq!(tags(html, "span", &[&["stub head"][..], &arrow].concat()).len(), 1, "{what}");
    assert_eq!(tags(html, "span", &["data-from="]).len(), 4, "{what}: one arrow, four pieces");
    let c4 = text_after(html, "div", &["row lane", "data-call=\"c4\""]);
    assert!(c4.contains("waits behind c3 (group `email`)"), "{what}: {c4}");
    // The session's state as `sessions` says it.
    assert_eq!(tags(html, "header", &[&format!("data-state=\"{state}\"")]).len(), 1, "{what}");
    // Both axes, each label an event's seq.
    assert!(tags(html, "div", &["row axis axis-seq"]).len() == 1, "{what}");
    assert!(tags(html, "div", &["row axis axis-time"]).len() == 1, "{what}");
    let times = tags(html, "span", &["axis-tick", "title=\"seq "]);
    assert!(times.len() >= 2, "{what}: {times:?}");
}

/// The page before recovery: the run drawn crashed, each call's decision as the library's plan
/// for a wake has it (action and rule), the partial outputs, no final answer.
fn check_before(html: &str, events: &[Event], what: &str) {
    assert_eq!(divs(html, &["mark bar run", "data-outcome=\"crash\""]).len(), 1, "{what}");
    assert!(divs(html, &["data-outcome=\"open\""]).is_empty(), "{what}");
    let state = fold(events);
    let new_run = NewRun {
        run: RunId::new("run-2"),
        entry: Entry::Wake,
        commit_checkpoint: CheckpointId::new("cp"),
    };
    let expected = plan(&state, &new_run, &registry(), &Config::default());
    assert_eq!(expected.calls.len(), 4);
    for c in &expected.calls {
        let call = format!("data-call=\"{}\"", c.call);
        let action = format!("data-action=\"{}\"", c.action.name());
        let rule = format!("data-rule=\"{}\"", c.rule.id);
        assert_eq!(
            tags(html, "tr", &["planned", &call, &action, &rule]).len(),
            1,
            "{what}: {call}"
        );
        let lane_action = format!("data-wake-action=\"{}\"", c.action.name());
        let lane_rule = format!("data-wake-rule=\"{}\"", c.rule.id);
        assert_eq!(divs(html, &["row lane", &call, &lane_action, &lane_rule]).len(), 1, "{what}");
    }
    for (call, partial) in
        [("c2", "saving seat preference: aisle"), ("c3", "connected to smtp.example.com; sending")]
    {
        let lane = text_after(html, "div", &["row lane", &format!("data-call=\"{call}\"")]);
        assert!(lane.contains("partial output #1 (no result)") && lane.contains(partial), "{lane}");
    }
    assert_eq!(tags(html, "p", &["final none", "data-state=\"crashed\""]).len(), 1, "{what}");
}

/// The page after recovery: the crashed run and the completed one, the pairings recorded with
/// their rules, c2's second attempt with its result, a wake now recovering nothing, the final
/// answer.
fn check_after(html: &str, events: &[Event], decided: &[Decided], final_answer: &str, what: &str) {
    assert_eq!(divs(html, &["mark bar run", "data-outcome=\"crash\""]).len(), 1, "{what}");
    assert_eq!(divs(html, &["mark bar run", "data-outcome=\"completed\""]).len(), 1, "{what}");
    let mut attempts = 0;
    for e in events {
        if let Event::AttemptStarted(a) = e {
            attempts += 1;
            let call = format!("data-call=\"{}\"", a.call);
            let n = format!("data-attempt=\"{}\"", a.attempt);
            assert_eq!(divs(html, &["mark bar attempt", &call, &n]).len(), 1, "{what}: {call} {n}");
        }
    }
    assert_eq!(divs(html, &["mark bar attempt"]).len(), attempts, "{what}");
    assert_eq!(divs(html, &["attempt ok", "data-call=\"c2\"", "data-attempt=\"2\""]).len(), 1);
    for (call, reason, rule) in [
        ("c3", "outcome_unknown", "recovery.outcome_unknown"),
        ("c4", "not_started", "order.group"),
    ] {
        let parts = [
            "pairing".to_owned(),
            format!("data-call=\"{call}\""),
            format!("data-reason=\"{reason}\""),
            format!("data-rule=\"{rule}\""),
        ];
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        assert_eq!(divs(html, &parts).len(), 1, "{what}: {call} paired {reason} by {rule}");
    }
    assert!(
        tags(html, "p", &["class=\"nothing\""]).len() == 1,
        "{what}: a wake now recovers nothing"
    );
    assert!(tags(html, "tr", &["planned"]).is_empty(), "{what}");
    // Each call's lane says what the wake decided and by which rule, as the wake's plan had it.
    let wake_at = events.iter().rposition(|e| matches!(e, Event::RunStarted(_))).unwrap();
    for (call, action, rule) in decided {
        let lane = text_after(html, "div", &["row lane", &format!("data-call=\"{call}\"")]);
        assert!(lane.contains(&format!("wake at seq {wake_at}: ")), "{what}: {lane}");
        assert!(lane.contains(&format!("by {rule}")), "{what}: {lane}");
        let parts = [
            "call-decided".to_owned(),
            format!("data-run-seq=\"{wake_at}\""),
            format!("data-action=\"{action}\""),
            format!("data-rule=\"{rule}\""),
        ];
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        assert_eq!(divs(html, &parts).len(), 1, "{what}: {call} {action} {rule}");
    }
    let said = text_after(html, "p", &["class=\"final\""]);
    assert!(said.contains(final_answer), "{what}: {said}");
}

/// Checks the layout in the browser: the test's own script, added to a copy of the page, measures
/// every text box (each clipped by the boxes that clip it) and reports any two drawn over each
/// other, and whether the facts, decisions and arrows are drawn inside the window.
const LAYOUT_CHECK: &str = r#"<script>
(function () {
  function clipped(rect, el) {
    var r = { l: rect.left, t: rect.top, r: rect.right, b: rect.bottom };
    for (var a = el; a && a !== document.documentElement; a = a.parentElement) {
      var cs = getComputedStyle(a);
      if (cs.overflowX !== "visible" || cs.overflowY !== "visible") {
        var ar = a.getBoundingClientRect();
        r.l = Math.max(r.l, ar.left); r.t = Math.max(r.t, ar.top);
        r.r = Math.min(r.r, ar.right); r.b = Math.min(r.b, ar.bottom);
      }
    }
    return r;
  }
  var boxes = [];
  var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  var node;
  while ((node = walker.nextNode())) {
    if (!node.textContent.trim() || node.parentElement.closest("script, style")) { continue; }
    var range = document.createRange();
    range.selectNodeContents(node);
    var rects = range.getClientRects();
    for (var i = 0; i < rects.length; i++) {
      var c = clipped(rects[i], node.parentElement);
      if (c.r - c.l > 0.5 && c.b - c.t > 0.5) {
        boxes.push({ c: c, node: node, text: node.textContent.trim().slice(0, 40) });
      }
    }
  }
  var overlaps = [];
  for (var i = 0; i < boxes.length; i++) {
    for (var j = i + 1; j < boxes.length; j++) {
      var a = boxes[i], b = boxes[j];
      if (a.node === b.node) { continue; }
      var w = Math.min(a.c.r, b.c.r) - Math.max(a.c.l, b.c.l);
      var h = Math.min(a.c.b, b.c.b) - Math.max(a.c.t, b.c.t);
      if (w > 1 && h > 1) { overlaps.push([a.text, b.text]); }
    }
  }
  // A tick never crosses a text either.
  var ticks = document.querySelectorAll(".mark.tick");
  for (var t = 0; t < ticks.length; t++) {
    var tr = clipped(ticks[t].getBoundingClientRect(), ticks[t].parentElement);
    for (var i = 0; i < boxes.length; i++) {
      var w = Math.min(tr.r, boxes[i].c.r) - Math.max(tr.l, boxes[i].c.l);
      var h = Math.min(tr.b, boxes[i].c.b) - Math.max(tr.t, boxes[i].c.t);
      if (w > 0.5 && h > 0.5) { overlaps.push([ticks[t].getAttribute("title"), boxes[i].text]); }
    }
  }
  var outside = [];
  var shown = document.querySelectorAll(".fact-text, .call-wake, .call-behind, .seg, .stub, .final, tr.planned, .axis-tick");
  for (var k = 0; k < shown.length; k++) {
    var r = shown[k].getBoundingClientRect();
    var cs = getComputedStyle(shown[k]);
    var thin = shown[k].classList.contains("stub") ? r.width <= 0 : (r.width <= 0 || r.height <= 0);
    if (thin || r.right > window.innerWidth + 0.5 || cs.visibility !== "visible" || cs.display === "none") {
      outside.push(shown[k].className + ": " + (shown[k].textContent || "").slice(0, 40));
    }
  }
  var pre = document.createElement("pre");
  pre.id = "layout-report";
  pre.textContent = JSON.stringify({ texts: boxes.length, shown: shown.length, overlaps: overlaps, outside: outside });
  document.body.appendChild(pre);
})();
</script></body>"#;

struct Browser {
    profile: PathBuf,
}

impl Browser {
    fn args(&self, page: &Path, extra: &str) -> Vec<String> {
        vec![
            "--headless".into(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--hide-scrollbars".into(),
            format!("--user-data-dir={}", self.profile.display()),
            "--window-size=1400,1500".into(),
            extra.to_owned(),
            format!("file://{}", page.display()),
        ]
    }

    /// The DOM of `page` as the browser built it, checked for text drawn over text and for
    /// marks drawn outside the window.
    fn dom(&self, page: &Path, what: &str) -> String {
        let checked = page.with_extension("check.html");
        let html = std::fs::read_to_string(page).unwrap();
        assert_eq!(html.matches("</body>").count(), 1);
        std::fs::write(&checked, html.replace("</body>", LAYOUT_CHECK)).unwrap();
        let dom = chromium(&self.args(&checked, "--dump-dom"));
        assert!(dom.contains("<html"), "{dom}");
        let report = dom.split("<pre id=\"layout-report\">").nth(1).unwrap();
        let report = report.split("</pre>").next().unwrap();
        let report = report.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
        let report: serde_json::Value = serde_json::from_str(&report).unwrap();
        println!(
            "{what}: {} text boxes measured, {} marks in view",
            report["texts"], report["shown"]
        );
        assert!(report["texts"].as_u64().unwrap() > 100, "{what}: {report}");
        assert_eq!(report["overlaps"], serde_json::json!([]), "{what}: text drawn over text");
        assert_eq!(report["outside"], serde_json::json!([]), "{what}: drawn outside the window");
        dom
    }

    /// A screenshot of `page`, kept at `keep`.
    fn screenshot(&self, page: &Path, keep: &Path) {
        chromium(&self.args(page, &format!("--screenshot={}", keep.display())));
        let png = std::fs::read(keep).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{}", png.len());
        println!("screenshot: {}", keep.display());
    }
}

/// A call, the action the plan chose for it and the rule that decided it.
type Decided = (String, &'static str, &'static str);

/// Wakes demo-1 as the demo's recovery does: c2 runs again and finishes, the step and a closing
/// reply are committed, the run completes. Returns the plan's decisions (call, action, rule).
fn recover(journal: &Path, final_answer: &str) -> Vec<Decided> {
    let store = FileStore::open(journal, FileOptions::default()).unwrap();
    let journal =
        Journal::new(Arc::new(store), Arc::new(registry()), JournalOptions::new()).unwrap();
    let session = SessionId::new("demo-1").unwrap();
    let run = journal.begin_run(&session, Entry::Wake).unwrap();
    let decided =
        run.plan().calls.iter().map(|c| (c.call.to_string(), c.action.name(), c.rule.id)).collect();
    let step = run.step().unwrap();
    let body = step.start_body(&CallId::from("c2")).unwrap();
    let saved = RawJson::from_value(&serde_json::json!({"saved": true})).unwrap();
    body.finish(saved, false).map_err(|e| e.error).unwrap();
    step.commit().unwrap();
    run.commit_reply(Reply::new(final_answer)).unwrap().commit().unwrap();
    run.end(RunOutcome::Completed).unwrap();
    decided
}

#[test]
fn the_timeline_before_and_after_recovery_shows_each_calls_decision_order_and_facts_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("demo");
    bin(&["demo", "--no-recover", "--dir", journal.to_str().unwrap()]);
    let url = format!("file:{}", journal.display());
    let before = dir.path().join("before.html");
    bin(&["view", &url, "demo-1", "-o", before.to_str().unwrap()]);
    let before_events = events(&journal);
    let html = std::fs::read_to_string(&before).unwrap();
    assert_eq!(sessions_state(&url), "crashed");
    check_common(&html, &before_events, "crashed", "the page before recovery");
    check_before(&html, &before_events, "the page before recovery");
    // Self-contained: nothing is fetched.
    for fetch in ["<link", "src=", "http://", "https://", "@import", "url("] {
        assert!(!html.contains(fetch), "the page fetches something: {fetch}");
    }

    // The wake the page announced is the wake that happens.
    let final_answer = "Your flight is booked and your aisle preference saved; please check \
                        whether the itinerary email went out.";
    let decided = recover(&journal, final_answer);
    for (call, action, rule) in &decided {
        let row = [
            "planned".to_owned(),
            format!("data-call=\"{call}\""),
            format!("data-action=\"{action}\""),
            format!("data-rule=\"{rule}\""),
        ];
        let row: Vec<&str> = row.iter().map(String::as_str).collect();
        assert_eq!(tags(&html, "tr", &row).len(), 1, "the page before said what the wake did");
    }
    let after = dir.path().join("after.html");
    bin(&["view", &url, "demo-1", "-o", after.to_str().unwrap()]);
    let after_events = events(&journal);
    let after_html = std::fs::read_to_string(&after).unwrap();
    assert_eq!(sessions_state(&url), "completed");
    check_common(&after_html, &after_events, "completed", "the page after recovery");
    check_after(&after_html, &after_events, &decided, final_answer, "the page after recovery");

    if let Err(why) = has_chromium() {
        println!("skipped: the browser half of this test needs Chromium: {why}");
        return;
    }
    let browser = Browser { profile: dir.path().join("profile") };
    let dom = browser.dom(&before, "before recovery");
    check_common(&dom, &before_events, "crashed", "the DOM before recovery");
    check_before(&dom, &before_events, "the DOM before recovery");
    let dom = browser.dom(&after, "after recovery");
    check_common(&dom, &after_events, "completed", "the DOM after recovery");
    check_after(&dom, &after_events, &decided, final_answer, "the DOM after recovery");

    // The details panel, filled by the page's script: `#seq=N` shows the event at seq N, as a
    // click on its mark does. Here the email's pairing: its JSON, with the rule.
    let at = after_events
        .iter()
        .position(|e| matches!(e, Event::Paired(p) if p.call.as_str() == "c3"))
        .unwrap();
    let mut link = browser.args(&after, "--dump-dom");
    let url = link.pop().unwrap();
    link.push(format!("{url}#seq={at}"));
    let dom = chromium(&link);
    let panel = dom.split("id=\"details\">").nth(1).unwrap().split("</pre>").next().unwrap();
    assert!(panel.contains("paired outcome_unknown by rule recovery.outcome_unknown"), "{panel}");

    let keep = Path::new(env!("CARGO_TARGET_TMPDIR"));
    browser.screenshot(&before, &keep.join("timeline-before.png"));
    browser.screenshot(&after, &keep.join("timeline-after.png"));
    // docs/view.png is the page before recovery: `STEPJOURNAL_VIEW_PNG=docs/view.png`.
    if let Some(copy) = std::env::var_os("STEPJOURNAL_VIEW_PNG") {
        std::fs::copy(keep.join("timeline-before.png"), Path::new(&copy)).unwrap();
    }
}
