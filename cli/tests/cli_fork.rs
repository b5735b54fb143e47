//! `stepjournal fork` on every backend: a fork at a step commit writes `forked_from` and the
//! snapshot into the new session and leaves the original as it was; a saved step with open
//! calls, an unknown checkpoint, an existing or invalid new session, a missing session are
//! refused with exit 2, a message naming what and where, no raw control character, and
//! nothing written.

mod cli_support;

use cli_support::*;
use stepjournal_codec::{Event, EventKind, Seq, SessionId};

/// Runs the binary, expecting exit 2, and returns standard error.
fn refused(args: &[&str]) -> String {
    let out = bin(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    let err = stderr(&out);
    assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "a raw control character: {err:?}");
    err
}

#[test]
fn a_fork_at_a_step_commit_is_written_and_every_refusal_writes_nothing() {
    for place in populated() {
        let url = place.url.as_str();
        let store = place.open();
        let before = events(&*store, "finished");
        drop(store);

        let out = bin_ok(&["fork", url, "finished", "--at", "cp-2", "--to", "finished-b"], 0);
        assert!(out.contains("forked session finished"), "{}: {out}", place.name);
        assert!(out.contains("\"type\":\"forked_from\"") && out.contains("\"type\":\"snapshot\""));
        let shown = bin_ok(&["show", url, "finished-b"], 0);
        assert!(shown.contains("forked from session finished"), "{shown}");

        let err = refused(&["fork", url, "stuck", "--at", "cp-1", "--to", "stuck-b"]);
        assert!(err.contains("its calls would be in flight in two sessions"), "{err}");
        assert!(err.contains("stuck") && err.contains("cp-1"), "{err}");
        let err = refused(&["fork", url, "finished", "--at", "cp-1", "--to", "x"]);
        assert!(err.contains("not a step commit") && err.contains("cp-2"), "{err}");
        let err = refused(&["fork", url, "finished", "--at", "nowhere\u{7}", "--to", "x"]);
        assert!(err.contains("no step of the session names it"), "{err}");
        let err = refused(&["fork", url, "finished", "--at", "cp-2", "--to", "finished-b"]);
        assert!(err.contains("finished-b") && err.contains("already exists"), "{err}");
        let err = refused(&["fork", url, "finished", "--at", "cp-2", "--to", "bad\u{1b}[31mid"]);
        assert!(err.contains("--to"), "{err}");
        let err = refused(&["fork", url, "nobody", "--at", "cp-2", "--to", "x"]);
        assert!(err.contains("nobody"), "{err}");

        let store = place.open();
        assert_eq!(events(&*store, "finished"), before, "the original is untouched");
        let kinds: Vec<EventKind> = events(&*store, "finished-b").iter().map(Event::kind).collect();
        assert_eq!(kinds, [EventKind::ForkedFrom, EventKind::Snapshot]);
        for nothing in ["stuck-b", "x", "bad\u{1b}[31mid"] {
            let tail = store.tail(&SessionId::from_stored(nothing)).unwrap();
            assert_eq!(tail, Seq(0), "{}: {nothing} was written", place.name);
        }
    }
}
