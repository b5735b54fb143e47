//! `stepjournal demo` through the real binary: a child process killed with SIGKILL mid-step, and
//! its recovery. The output must name what recovery did, and the journal left behind must agree.

use std::path::Path;
use std::process::{Command, Output};

use stepjournal::recovery::{Action, TranscriptItem, fold, transcript, verify};
use stepjournal_backends::JournalStore;
use stepjournal_backends::file::FileStore;
use stepjournal_codec::{Attempt, CallId, Event, PairReason, RunOutcome, SessionId};

fn demo(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stepjournal"))
        .arg("demo")
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout {}\nstderr {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The session's events, read from the file journal the demo left.
fn events(dir: &Path, session: &str) -> Vec<Event> {
    let store = FileStore::open_read_only(dir).unwrap();
    store
        .read_all(&SessionId::new(session).unwrap())
        .unwrap()
        .into_iter()
        .map(|r| r.event)
        .collect()
}

/// Checks one demo session: the output's claims against the journal.
fn check_session(dir: &Path, session: &str, text: &str) {
    let events = events(dir, session);
    assert!(verify(&events).is_empty(), "{:?}", verify(&events));
    let state = fold(&events);
    assert_eq!(state.last_run_outcome(), Some(RunOutcome::Completed), "{text}");
    assert!(state.saved_step().is_none(), "every step is committed");
    assert_eq!(state.runs().len(), 2, "the child's run and the recovery's");

    // c2 (safe) ran again as attempt 2 under the dispatch id of attempt 1.
    let c2 = state.call(&CallId::from("c2")).unwrap();
    let dispatch = c2.dispatch().unwrap().to_string();
    assert_eq!(c2.bodies(), 2);
    assert_eq!(c2.results().next().unwrap().attempt, Attempt(2));
    assert!(
        text.contains(&format!(
            "c2 set_preference ran again as attempt 2 with the same dispatch id {dispatch}"
        )),
        "{text}"
    );
    assert!(text.contains(&format!("journal: file:{}   session: {session}", dir.display())));

    // c3 (unsafe) has one body and is answered outcome_unknown with its committed output.
    let c3 = state.call(&CallId::from("c3")).unwrap();
    assert_eq!(c3.bodies(), 1, "an unsafe call never starts a second body");
    let shown = transcript(&state);
    let paired = |call: &str| {
        shown.iter().find_map(|i| match i {
            TranscriptItem::Paired { call: c, reason, partial, .. } if c.as_str() == call => {
                Some((*reason, partial.clone()))
            }
            _ => None,
        })
    };
    let (reason, partial) = paired("c3").unwrap();
    assert_eq!(reason, PairReason::OutcomeUnknown);
    assert_eq!(partial, "connected to smtp.example.com; sending");
    assert!(text.contains("c3 send_email: answered `outcome_unknown`"), "{text}");
    assert!(text.contains("rule recovery.outcome_unknown: 1 body started"), "{text}");
    assert!(text.contains(&format!("with the output it had committed ({partial:?})")), "{text}");

    // c4, queued behind c3 in group `email`, never started; c1 kept its result.
    assert_eq!(paired("c4").unwrap().0, PairReason::NotStarted);
    assert_eq!(state.call(&CallId::from("c4")).unwrap().bodies(), 0);
    assert!(text.contains("c4 archive_email: answered `not_started`"), "{text}");
    assert!(text.contains("rule order.group"), "{text}");
    assert!(text.contains("rule keep.resolved"), "{text}");
    assert!(text.contains(&format!("stepjournal show file:{} {session}", dir.display())));

    // The child was killed while both bodies ran: nothing of them after their output but
    // the recovery's run.
    let recovery_run = events.iter().rposition(|e| matches!(e, Event::RunStarted(_))).unwrap();
    assert!(matches!(&events[recovery_run - 1], Event::OutputChunk(c) if c.call.as_str() == "c3"));
    assert!(text.contains("signal 9 (SIGKILL)") || !cfg!(unix), "{text}");

    // The plan the recovery printed is the one recovery makes for that log.
    let before: Vec<Event> = events[..recovery_run].to_vec();
    let plan = stepjournal::recovery::plan(
        &fold(&before),
        &stepjournal::recovery::NewRun {
            run: "r".into(),
            entry: stepjournal_codec::Entry::Wake,
            commit_checkpoint: "cp".into(),
        },
        &stepjournal::registry::SchemaRegistry::from_tools_json(&serde_json::json!({
            "search_flights": { "replay": "safe" },
            "set_preference": { "replay": "safe" },
            "send_email": { "replay": "unsafe" },
            "archive_email": { "replay": "safe" }
        }))
        .unwrap(),
        &stepjournal::recovery::Config::default(),
    );
    assert!(matches!(
        plan.call(&CallId::from("c2")).unwrap().action,
        Action::Run { attempt: Attempt(2), .. }
    ));
}

#[test]
fn the_demo_kills_a_child_mid_step_and_recovers_it_and_runs_again_in_the_same_journal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("stepjournal-demo");
    let first = stdout(&demo(&dir));
    check_session(&dir, "demo-1", &first);
    // The directory holds the journal's own entries alone, so any store URL opens it for writing.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(stepjournal::backends::file::is_journal_entry(&name), "{name}");
    }
    let url = format!("file:{}", dir.display());
    let store =
        stepjournal::backends::open_url(&url, stepjournal::backends::OpenOptions::default());
    assert!(store.is_ok(), "{:?}", store.err());
    drop(store);

    // Run again: the same journal, a new session.
    let second = stdout(&demo(&dir));
    check_session(&dir, "demo-2", &second);
    check_session(&dir, "demo-1", &first);
}

#[test]
fn the_demo_refuses_a_directory_that_is_not_a_demo_journal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mine");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "keep me").unwrap();
    let out = demo(&dir);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a demo journal"), "{err}");
    assert!(err.contains("notes.txt"), "{err}");
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["notes.txt"], "nothing was written");
    assert!(out.stdout.is_empty());

    // A file where the directory should be is refused too.
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = demo(&file);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("it is a file"));
}

#[test]
fn the_demo_reuses_its_journal_after_a_torn_tail_was_kept_aside() {
    // A journal holding a torn tail's copy (`*.torn`) is still the demo's: the copy is an entry a
    // file journal writes.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    stdout(&demo(&dir));
    std::fs::write(dir.join("00000000000000000001.seg.4096.torn"), b"torn bytes").unwrap();
    let again = stdout(&demo(&dir));
    check_session(&dir, "demo-2", &again);
}

#[test]
fn the_demo_child_is_not_listed_in_the_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_stepjournal")).arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.lines().any(|l| l.trim_start().starts_with("demo ")), "{help}");
    assert!(!help.contains("demo-child"), "{help}");
}

#[test]
fn no_recover_leaves_the_session_stuck_where_the_crash_left_it() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let out = Command::new(env!("CARGO_BIN_EXE_stepjournal"))
        .args(["demo", "--no-recover", "--dir"])
        .arg(&journal)
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(text.contains("SIGKILL") && text.contains("--no-recover"), "{text}");
    let stuck = events(&journal, "demo-1");
    assert!(verify(&stuck).is_empty(), "{:?}", verify(&stuck));
    let state = fold(&stuck);
    assert_eq!(state.runs().len(), 1, "no recovery run began");
    assert_eq!(state.last_run_outcome(), None, "the crashed run never ended");
    let saved = state.saved_step().expect("the step the crash interrupted");
    let open: Vec<String> = state
        .calls_of(saved)
        .iter()
        .filter(|c| !c.is_resolved())
        .map(|c| c.id().to_string())
        .collect();
    assert_eq!(open, ["c2", "c3", "c4"], "c1 finished; c2 and c3 were running; c4 waited");
    // A later demo leaves the stuck session alone and recovers a new one.
    let text = stdout(&demo(&journal));
    check_session(&journal, "demo-2", &text);
    assert_eq!(fold(&events(&journal, "demo-1")).runs().len(), 1);
}
