//! `stepjournal export` and `stepjournal import` through the binary: round trips across every
//! pair of backends in the build with byte-identical re-exports, and imports refused whole.

mod cli_support;

use std::path::{Path, PathBuf};

use cli_support::*;

const HEADER: &str = r#"{"format":"stepjournal-export","version":1}"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_export_is_a_header_then_every_event_by_session_then_seq() {
    let place = file_place();
    populate(&*place.open());
    let text = bin_ok(&["export", &place.url], 0);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(HEADER));
    let places: Vec<(String, u64, u64)> = lines
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert!(l.starts_with(r#"{"type":""#), "{l}");
            (
                v["session"].as_str().unwrap().to_owned(),
                v["seq"].as_u64().unwrap(),
                v["at"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(places.len(), 52);
    let mut sorted = places.clone();
    sorted.sort();
    assert_eq!(places, sorted);
    assert_eq!(places[0], ("failed".to_owned(), 0, T0));
    golden("export.jsonl", &text);
    let two = bin_ok(&["export", &place.url, "stuck", "finished", "stuck"], 0);
    let sessions: Vec<&str> = two
        .lines()
        .skip(1)
        .map(|l| if l.contains(r#""session":"stuck""#) { "stuck" } else { "finished" })
        .collect();
    assert_eq!(sessions.iter().filter(|s| **s == "finished").count(), 10);
    assert_eq!(sessions.iter().filter(|s| **s == "stuck").count(), 8);
    assert_eq!(sessions[0], "finished");
    let out = bin(&["export", &place.url, "stuck", "nobody"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing is written before the check");
    assert!(stderr(&out).contains("`nobody`"), "{}", stderr(&out));
}

#[test]
fn export_import_round_trips_across_every_pair_of_backends_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let sources = populated();
    for source in &sources {
        let exported = bin_ok(&["export", &source.url], 0);
        let file = write(dir.path(), &format!("{}.jsonl", source.name), &exported);
        for target in places() {
            let out = bin_ok(&["import", file.to_str().unwrap(), "--to", &target.url], 0);
            assert!(out.contains("imported 6 sessions, 52 events"), "{out}");
            let again = bin_ok(&["export", &target.url], 0);
            assert!(again == exported, "{} -> {}: the re-export differs", source.name, target.name);
        }
    }
}

#[test]
fn a_journal_moved_through_every_backend_and_back_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let chain = places();
    let first = &chain[0];
    populate(&*first.open());
    let original = bin_ok(&["export", &first.url], 0);
    let mut text = original.clone();
    let mut hops = chain.iter().skip(1).collect::<Vec<_>>();
    let back = file_place();
    hops.push(&back);
    for (i, hop) in hops.iter().enumerate() {
        let file = write(dir.path(), &format!("hop-{i}.jsonl"), &text);
        bin_ok(&["import", file.to_str().unwrap(), "--to", &hop.url], 0);
        text = bin_ok(&["export", &hop.url], 0);
    }
    assert!(text == original, "moving the journal through {} hops changed it", hops.len());
}

#[test]
fn an_import_is_refused_whole_when_a_session_exists_in_the_target() {
    let dir = tempfile::tempdir().unwrap();
    for target in places() {
        let store = target.open();
        append_session(&*store, "stuck", &stuck(), T0);
        drop(store);
        let source = file_place();
        populate(&*source.open());
        let file = write(dir.path(), "all.jsonl", &bin_ok(&["export", &source.url], 0));
        let out = bin(&["import", file.to_str().unwrap(), "--to", &target.url]);
        assert_eq!(out.status.code(), Some(2), "{}", target.name);
        let err = stderr(&out);
        assert!(err.contains("stuck") && err.contains("nothing was imported"), "{err}");
        let left = bin_ok(&["sessions", &target.url, "--json"], 0);
        assert_eq!(left.lines().count(), 1, "{}: {left}", target.name);
    }
}

#[test]
fn a_bad_export_names_its_line_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let source = file_place();
    populate(&*source.open());
    let good = bin_ok(&["export", &source.url], 0);
    let lines: Vec<&str> = good.lines().collect();
    let target = file_place();
    let cases: Vec<(String, &str, &str)> = vec![
        (format!("{}\n", lines[1..].join("\n")), "line 1", "not a stepjournal export"),
        (good.replacen(r#""version":1"#, r#""version":2"#, 1), "line 1", "version 2"),
        (good.replacen(r#""seq":3,"#, r#""seq":4,"#, 1), "line 5", "seq 4 where seq 3 is next"),
        (
            good.replacen(r#"{"type":"message""#, r#"{"type":"teleported""#, 1),
            "line 3",
            "teleported",
        ),
        (format!("{good}{}\n", lines[1]), "line 54", "appears again"),
        (good.replacen(r#","at":"#, r#","t":"#, 1), "line 2", "`at`"),
        (String::new(), "line 1", "empty"),
    ];
    for (text, line, needle) in cases {
        let file = write(dir.path(), "bad.jsonl", &text);
        let out = bin(&["import", file.to_str().unwrap(), "--to", &target.url]);
        assert_eq!(out.status.code(), Some(2), "{needle}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!("bad.jsonl {line}:")) && err.contains(needle),
            "{needle}: {err}"
        );
        assert!(err.contains("nothing was imported"), "{err}");
        assert!(!target.path().exists(), "{needle}: the target was created");
    }
    let out = bin(&["import", "/nonexistent/export.jsonl", "--to", &target.url]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/nonexistent/export.jsonl"), "{}", stderr(&out));
}

#[test]
fn stats_count_sessions_events_bytes_and_kinds_on_every_backend() {
    let mut first_records = None;
    for place in populated() {
        let json: serde_json::Value =
            serde_json::from_str(&bin_ok(&["stats", &place.url, "--json"], 0)).unwrap();
        assert_eq!(
            (json["sessions"].as_u64(), json["events"].as_u64()),
            (Some(6), Some(52)),
            "{}",
            place.name
        );
        let kinds = &json["kinds"];
        assert_eq!(kinds["run_started"], 7);
        assert_eq!(kinds["reply_committed"], 6);
        assert_eq!(kinds["output_chunk"], 3);
        assert_eq!(kinds["rewound"], 1);
        assert!(kinds.get("model_aborted").is_none(), "kinds with no events are left out");
        let total: u64 = kinds.as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(total, 52);
        let bytes = json["bytes"].as_u64().unwrap();
        if place.name == "file" {
            let on_disk: u64 = std::fs::read_dir(place.path())
                .unwrap()
                .map(|e| e.unwrap())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
                .map(|e| e.metadata().unwrap().len())
                .sum();
            assert_eq!(bytes, on_disk);
        }
        let records = json["record_bytes"].as_u64().unwrap();
        assert!(records > 52 * 30 && records < 52 * 300, "{}: {records}", place.name);
        if place.name != "file" {
            assert_eq!(bytes, records);
        }
        match &first_records {
            None => first_records = Some(records),
            Some(r) => assert_eq!(*r, records, "{}: the records' sizes differ", place.name),
        }
        let text = bin_ok(&["stats", &place.url], 0);
        assert!(
            text.contains("sessions  6\n") && text.contains("  output_chunk     3\n"),
            "{text}"
        );
    }
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_journal_moved_file_to_sqlite_to_postgres_to_file_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let first = file_place();
    populate(&*first.open());
    let original = bin_ok(&["export", &first.url], 0);
    let mut text = original.clone();
    for (i, hop) in [sqlite_place(), pg_place(), file_place()].iter().enumerate() {
        let file = write(dir.path(), &format!("hop-{i}.jsonl"), &text);
        bin_ok(&["import", file.to_str().unwrap(), "--to", &hop.url], 0);
        text = bin_ok(&["export", &hop.url], 0);
        assert!(text == original, "the export from {} differs", hop.name);
    }
}
