//! `stepjournal trim` on every backend: a long session written through the library is trimmed
//! to a kept snapshot; `show`, `calls`, `sessions`, `plan`, `export` and `verify` read the
//! trimmed log (the export starts at the kept snapshot, `verify` finds nothing); a second trim
//! keeping the same turns finds nothing to drop; a missing session is refused with exit 2.

mod cli_support;

use std::sync::Arc;

use cli_support::*;
use stepjournal::recovery::MemoryRegistry;
use stepjournal::{Journal, JournalOptions, Reply};
use stepjournal_backends::JournalStore;
use stepjournal_codec::{
    Call, CallId, CallKind, Entry, RawJson, Replay, RunOutcome, Seq, SessionId, ToolName,
};

fn write_long(store: Arc<dyn JournalStore>) {
    let registry = MemoryRegistry::new().with_tool("search", Replay::Safe);
    let options = JournalOptions::new().snapshot_every(2).snapshot_after_bytes(0);
    let journal = Journal::new(store, Arc::new(registry), options).unwrap();
    let session = SessionId::new("long").unwrap();
    for turn in 0..5 {
        let run = journal
            .begin_run(&session, Entry::NewTurn { message: format!("turn {turn}") })
            .unwrap();
        for i in 0..3 {
            let id = format!("t{turn}c{i}");
            let call = Call {
                call: CallId::new(id.as_str()),
                tool: ToolName::new("search"),
                args: RawJson::empty_object(),
                kind: CallKind::Tool,
                replay: Replay::Safe,
                group: None,
                sequential: false,
            };
            let step = run.commit_reply(Reply::new("looking").call(call)).unwrap();
            let body = step.start_body(&CallId::new(id.as_str())).unwrap();
            body.finish(RawJson::parse("{\"found\":1}").unwrap(), false).unwrap();
            step.commit().unwrap();
        }
        run.end(RunOutcome::Completed).unwrap();
    }
    stepjournal::writer::block_on(journal.shutdown(std::time::Duration::ZERO));
}

#[test]
fn a_long_session_is_trimmed_and_every_command_reads_what_is_kept() {
    for place in places() {
        let url = place.url.as_str();
        let before = {
            let store = place.open();
            write_long(Arc::clone(&store));
            store.read_all(&SessionId::new("long").unwrap()).unwrap()
        };
        let out = bin_ok(&["trim", url, "long", "--keep-turns", "2"], 0);
        assert!(out.contains("trimmed session long"), "{}: {out}", place.name);
        assert!(out.contains("3 turns dropped in all"), "{}: {out}", place.name);

        let kept = place.open().read_all(&SessionId::new("long").unwrap()).unwrap();
        assert!(kept[0].seq > Seq(0) && kept.len() < before.len(), "{}", place.name);
        let export = bin_ok(&["export", url, "long"], 0);
        let first = export.lines().nth(1).unwrap_or_default();
        assert!(first.contains(&format!("\"seq\":{}", kept[0].seq)), "{}: {first}", place.name);
        assert!(export.contains("\"type\":\"trimmed\""), "{}", place.name);
        let shown = bin_ok(&["show", url, "long"], 0);
        assert!(shown.contains("trimmed: the events before seq"), "{}: {shown}", place.name);
        bin_ok(&["calls", url, "long"], 0);
        let sessions = bin_ok(&["sessions", url], 0);
        assert!(sessions.contains("long"), "{sessions}");
        let plan = bin_ok(&["plan", url, "long", "--entry", "wake"], 0);
        assert!(!plan.is_empty());
        let verify = bin(&["verify", url]);
        assert_eq!(
            verify.status.code(),
            Some(0),
            "{}: {}",
            place.name,
            String::from_utf8_lossy(&verify.stdout)
        );

        let again = bin_ok(&["trim", url, "long", "--keep-turns", "2"], 0);
        assert!(again.contains("nothing to trim"), "{}: {again}", place.name);
        let out = bin(&["trim", url, "nobody"]);
        assert_eq!(out.status.code(), Some(2), "{}", place.name);
        assert!(stderr(&out).contains("nobody"), "{}", stderr(&out));
    }
}

#[test]
fn the_export_of_a_trimmed_session_is_refused_by_import_saying_why() {
    let place = places().into_iter().next().unwrap();
    let url = place.url.as_str();
    write_long(place.open());
    bin_ok(&["trim", url, "long", "--keep-turns", "2"], 0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("long.jsonl");
    std::fs::write(&file, bin_ok(&["export", url, "long"], 0)).unwrap();
    let target = format!("sqlite:{}", dir.path().join("copy.db").display());
    let out = bin(&["import", file.to_str().unwrap(), "--to", &target]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("it was trimmed"), "{}", stderr(&out));
}
