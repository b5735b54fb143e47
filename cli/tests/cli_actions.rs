//! The write commands through the session writer, on every backend: `stop`, `answer`,
//! `approve`, `deny` and `delete`, each with `--dry-run` writing nothing; a `stop` that fences a
//! live run on SQLite and PostgreSQL; a refusal naming the lock on a file journal held open.

mod cli_support;

use std::sync::Arc;

use cli_support::*;
use stepjournal::WriteError;
use stepjournal::writer::JournalOptions;
use stepjournal::{Journal, Reply};
use stepjournal_backends::JournalStore;
use stepjournal_codec::{CallId, CallKind, Entry, Event, Replay, RunOutcome, SessionId, Suspended};
use stepjournal_recovery::MemoryRegistry;

/// A session suspended on an approval (c1) and a client call (c2).
fn gated() -> Batches {
    vec![
        vec![
            run_started("run-1", Entry::NewTurn { message: "mail them".into() }),
            message("email the group, ask me the subject"),
        ],
        vec![
            reply(
                1,
                "cp-1",
                "I need your approval and a subject.",
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

fn state_of(url: &str, session: &str) -> String {
    let json = bin_ok(&["sessions", url, "--json"], 0);
    json.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["session"] == session)
        .map(|v| v["state"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| "gone".to_owned())
}

#[test]
fn every_action_works_on_every_backend_and_a_dry_run_writes_nothing() {
    for place in populated() {
        let store = place.open();
        append_session(&*store, "gated", &gated(), T0);
        append_session(&*store, "gated2", &gated(), T0);
        let url = &place.url;
        let before: Vec<_> =
            ["stuck", "gated", "gated2"].iter().map(|s| events(&*store, s)).collect();
        drop(store);

        // Dry runs: the plan and the events, nothing written.
        let plan = bin_ok(&["stop", url, "stuck", "--dry-run"], 0);
        assert!(plan.contains("a dry run: nothing is written"), "{}: {plan}", place.name);
        assert!(plan.contains("run_stopped") && plan.contains("stop.run_stopped"), "{plan}");
        let dry = bin_ok(
            &["answer", url, "gated", "c2", "--output", r#"{"subject":"hi"}"#, "--dry-run"],
            0,
        );
        assert!(
            dry.contains(r#""type":"client_answer""#) && dry.contains("suspends on c1"),
            "{dry}"
        );
        let dry = bin_ok(&["approve", url, "gated", "c1", "--dry-run"], 0);
        assert!(dry.contains(r#""approved":true"#), "{dry}");
        bin_ok(&["deny", url, "gated", "c1", "--dry-run"], 0);
        let dry = bin_ok(&["delete", url, "gated2", "--dry-run"], 0);
        assert!(dry.contains("would delete session gated2 (7 events)"), "{dry}");
        let dry = bin_ok(&["delete", url, "--older-than", "1d", "--dry-run"], 0);
        assert!(dry.contains("would delete session stuck"), "{dry}");
        let store = place.open();
        let after: Vec<_> =
            ["stuck", "gated", "gated2"].iter().map(|s| events(&*store, s)).collect();
        assert_eq!(before, after, "{}: a dry run wrote", place.name);
        drop(store);

        // stop: the unresolved calls paired run_stopped, the run ended stopped.
        let said = bin_ok(&["stop", url, "stuck"], 0);
        assert!(said.starts_with("stopped session stuck of "), "{said}");
        assert!(
            said.contains(r#""reason":"run_stopped""#) && said.contains(r#""outcome":"stopped""#),
            "{said}"
        );
        assert_eq!(state_of(url, "stuck"), "stopped");
        // Again: nothing is left to stop, and nothing is written.
        let tail = events(&*place.open(), "stuck").len();
        let said = bin_ok(&["stop", url, "stuck"], 0);
        assert!(said.contains("nothing to stop; nothing was written"), "{said}");
        assert_eq!(events(&*place.open(), "stuck").len(), tail);

        // approve c1: written in a wake run, which suspends on c2, still waiting.
        let said = bin_ok(&["approve", url, "gated", "c1"], 0);
        assert!(said.contains(r#""type":"approval_decided""#), "{said}");
        assert!(said.contains("the run suspended on c2"), "{said}");
        assert_eq!(state_of(url, "gated"), "suspended");
        // Twice is refused, nothing written.
        let out = bin(&["approve", url, "gated", "c1"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("has no call `c1` waiting"), "{}", stderr(&out));
        // answer c2: nothing else waits; the run is left for the runtime's recovery.
        let said = bin_ok(&["answer", url, "gated", "c2", "--output", r#"{"subject":"hi"}"#], 0);
        assert!(said.contains(r#""output":{"subject":"hi"}"#), "{said}");
        assert!(said.contains("left for the runtime's recovery"), "{said}");
        assert_eq!(state_of(url, "gated"), "crashed", "{}", place.name);
        // deny on the twin.
        let said = bin_ok(&["deny", url, "gated2", "c1"], 0);
        assert!(said.contains(r#""approved":false"#), "{said}");
        // A bad answer is refused before anything is opened for writing.
        let out = bin(&["answer", url, "gated2", "c2", "--output", "{oops"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("--output"), "{}", stderr(&out));

        // delete: refused without --yes; by name; by age.
        let out = bin(&["delete", url, "gated2"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("--yes"));
        let said = bin_ok(&["delete", url, "gated2", "--yes"], 0);
        assert!(said.contains("deleted session gated2"), "{said}");
        assert_eq!(state_of(url, "gated2"), "gone");
        // The fixture's sessions were appended in 2025; "stuck" and "gated" just now.
        let said = bin_ok(&["delete", url, "--older-than", "30d", "--yes"], 0);
        assert_eq!(said.matches("deleted session ").count(), 5, "{said}");
        let left = bin_ok(&["sessions", url, "--json"], 0);
        assert_eq!(left.lines().count(), 2, "{left}");
    }
}

#[test]
fn write_commands_on_a_file_journal_a_runtime_holds_are_refused_naming_the_lock() {
    let place = file_place();
    let store = place.open();
    populate(&*store);
    // The store stays open: this process holds the journal's lock, as a runtime would.
    for args in [
        vec!["stop", place.url.as_str(), "stuck"],
        vec!["answer", place.url.as_str(), "suspended", "c1", "--output", "1"],
        vec!["approve", place.url.as_str(), "suspended", "c1"],
        vec!["delete", place.url.as_str(), "stuck", "--yes"],
    ] {
        let out = bin(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("a runtime holds the journal's lock") && err.contains("LOCK"),
            "{err}"
        );
        assert!(!err.contains("  "), "no run of spaces in the message: {err:?}");
        // Each names the runtime API that does what it would have done.
        let api = if args[0] == "delete" { "JournalStore::delete" } else { "Journal::stop" };
        assert!(err.contains(api), "{err}");
    }
    // A dry run reads only, beside the runtime, and says the stop would be refused.
    let said = bin_ok(&["stop", &place.url, "stuck", "--dry-run"], 0);
    assert!(said.contains("this stop would be refused"), "{said}");
    assert_eq!(state_of(&place.url, "stuck"), "running");
    drop(store);
    assert_eq!(state_of(&place.url, "stuck"), "crashed");
    bin_ok(&["stop", &place.url, "stuck"], 0);
}

/// A runtime's run with a body in flight; `stop` from the command fences it: the body's result
/// is refused, and nothing of it reaches the log.
fn stop_fences_a_live_run(place: &Place) {
    let store = place.open();
    let registry = MemoryRegistry::new()
        .with_tool("charge_card", Replay::Unsafe)
        .with_tool("ask_user", Replay::Unsafe);
    let journal =
        Journal::new(Arc::clone(&store), Arc::new(registry), JournalOptions::new()).unwrap();
    let session = SessionId::new("live").unwrap();
    let run = journal.begin_run(&session, Entry::NewTurn { message: "pay".into() }).unwrap();
    let c = call("c1", "charge_card", Replay::Unsafe, CallKind::Tool);
    let ask = call("c2", "ask_user", Replay::Unsafe, CallKind::Client);
    let step = run.commit_reply(Reply::new("Paying.").call(c).call(ask)).unwrap();
    let body = step.start_body(&CallId::from("c1")).unwrap();
    assert_eq!(state_of(&place.url, "live"), "running", "{}", place.name);
    // The command refuses to answer into a running session, and stops it.
    let out = bin(&["answer", &place.url, "live", "c2", "--output", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is running"), "{}", stderr(&out));
    let out = bin(&["delete", &place.url, "live", "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("is running") && err.contains("nothing was deleted"), "{err}");
    // The runtime API named is the one that deletes, not the ones that answer.
    assert!(err.contains("JournalStore::delete") && !err.contains("answer_client"), "{err}");
    // A dry run says the stop would fence the live run (the defect: it said nothing of it).
    let said = bin_ok(&["stop", &place.url, "live", "--dry-run"], 0);
    assert!(said.contains("is running") && said.contains("would fence that run"), "{said}");
    let said = bin_ok(&["stop", &place.url, "live"], 0);
    assert!(said.contains(r#""outcome":"stopped""#), "{said}");
    let tail = store.tail(&session).unwrap();
    let refused =
        body.finish(stepjournal_codec::RawJson::from_value(&serde_json::json!(1)).unwrap(), false);
    match refused {
        Err(e) => assert!(matches!(*e.error, WriteError::Fenced { .. }), "{:?}", e.error),
        Ok(_) => panic!("{}: the fenced run's result was written", place.name),
    }
    assert_eq!(store.tail(&session).unwrap(), tail, "the fenced run wrote");
    assert_eq!(state_of(&place.url, "live"), "stopped");
}

#[test]
fn stop_fences_a_live_run_on_sqlite() {
    stop_fences_a_live_run(&sqlite_place());
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn stop_fences_a_live_run_on_postgres() {
    stop_fences_a_live_run(&pg_place());
}

/// A store that, just before the `nth` append of the command, lets another writer append
/// `foreign` at the session's tail: the command's append then meets a concurrent one.
struct Racing {
    inner: Arc<dyn JournalStore>,
    nth: usize,
    appends: std::sync::atomic::AtomicUsize,
    foreign: Vec<Event>,
}

impl JournalStore for Racing {
    fn max_durability(&self) -> stepjournal_backends::Durability {
        self.inner.max_durability()
    }
    fn append(
        &self,
        session: &SessionId,
        expected: stepjournal_codec::Seq,
        events: &[stepjournal_codec::Stamped],
        durability: stepjournal_backends::Durability,
    ) -> Result<stepjournal_backends::AppendAck, stepjournal_backends::AppendError> {
        let n = self.appends.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if n + 1 == self.nth {
            let tail = self.inner.tail(session).unwrap();
            let foreign: Vec<_> = self
                .foreign
                .iter()
                .map(|e| {
                    stepjournal_codec::Stamped::at(stepjournal_codec::UnixMillis(T0), e.clone())
                })
                .collect();
            self.inner.append(session, tail, &foreign, durability).unwrap();
        }
        self.inner.append(session, expected, events, durability)
    }
    fn read(
        &self,
        session: &SessionId,
        range: std::ops::Range<stepjournal_codec::Seq>,
    ) -> Result<Vec<stepjournal_codec::Record>, stepjournal_backends::StoreError> {
        self.inner.read(session, range)
    }
    fn tail(
        &self,
        session: &SessionId,
    ) -> Result<stepjournal_codec::Seq, stepjournal_backends::StoreError> {
        self.inner.tail(session)
    }
    fn sessions(&self) -> Result<Vec<SessionId>, stepjournal_backends::StoreError> {
        self.inner.sessions()
    }
    fn delete(&self, session: &SessionId) -> Result<bool, stepjournal_backends::StoreError> {
        self.inner.delete(session)
    }
}

fn racing(place: &Place, nth: usize, foreign: Vec<Event>) -> Arc<dyn JournalStore> {
    let inner = place.open();
    append_session(&*inner, "gated", &gated(), T0);
    Arc::new(Racing { inner, nth, appends: Default::default(), foreign })
}

#[test]
fn an_answer_that_meets_a_concurrent_append_reads_again_or_is_refused_with_what_it_met() {
    let session = SessionId::new("gated").unwrap();
    let (c1, c2) = (CallId::from("c1"), CallId::from("c2"));
    let output = stepjournal_codec::RawJson::parse(r#"{"subject":"hi"}"#).unwrap();
    for place in [file_place(), sqlite_place()] {
        // Another writer decides c1 just before the wake's batch lands: the writer reads again,
        // plans again and writes its run after it; the answer follows.
        let approval = stepjournal_codec::ApprovalDecided { call: c1.clone(), approved: true };
        let store = racing(&place, 1, vec![Event::ApprovalDecided(approval)]);
        let mut out = Vec::new();
        stepjournal_cli::answer::answer_on(
            Arc::clone(&store),
            &place.url,
            &session,
            &c2,
            output.clone(),
            &mut out,
        )
        .unwrap();
        let said = String::from_utf8(out).unwrap();
        let log = events(&*store, "gated");
        assert!(matches!(log[7], Event::ApprovalDecided(_)), "{}: {log:?}", place.name);
        assert!(matches!(log[8], Event::RunStarted(_)), "{log:?}");
        assert!(log.iter().any(|e| matches!(e, Event::ClientAnswer(a) if a.call == c2)), "{log:?}");
        assert!(said.contains("at seq 8:"), "{said}");
        drop(store);
    }
    for place in [file_place(), sqlite_place()] {
        // A newer run begins elsewhere just before the wake's batch (which carries the answer)
        // lands: the call is that run's to decide now, and the answer is refused with what it
        // met, nothing of it written.
        let store = racing(&place, 1, vec![run_started("run-elsewhere", Entry::Wake)]);
        let err = stepjournal_cli::answer::answer_on(
            Arc::clone(&store),
            &place.url,
            &session,
            &c2,
            output.clone(),
            &mut Vec::new(),
        )
        .unwrap_err();
        let text = err.full_message();
        assert!(text.contains("waiting") && text.contains("c2"), "{}: {text}", place.name);
        let log = events(&*store, "gated");
        assert!(
            matches!(log.get(7), Some(Event::RunStarted(r)) if r.run.as_str() == "run-elsewhere"),
            "{log:?}"
        );
        assert_eq!(log.len(), 8, "nothing of the answer was written: {log:?}");
    }
}
