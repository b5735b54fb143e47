//! Reading around damage: `--on-corruption skip` on every read command and `salvage`, on a
//! file journal with one flipped byte in one session (every other session intact and listed),
//! and on an SQLite store with one damaged record.

mod cli_support;

use std::path::Path;

use cli_support::*;

/// Flips one byte inside the first stored batch of session `victim` (past its id, inside the
/// frame's records) in the journal's segment files; returns the segment and offset.
fn flip_in_session(dir: &Path, victim: &str) -> (std::path::PathBuf, usize) {
    let mut segments: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segments.sort();
    for path in segments {
        let mut bytes = std::fs::read(&path).unwrap();
        let needle = victim.as_bytes();
        if let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) {
            let target = at + needle.len() + 12;
            bytes[target] ^= 0x40;
            std::fs::write(&path, &bytes).unwrap();
            return (path, target);
        }
    }
    panic!("session {victim} not found in {}", dir.display());
}

fn tree_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap_or_default()))
        .collect();
    all.sort();
    all
}

const INTACT: [&str; 5] = ["failed", "finished", "stopped", "stuck", "suspended"];

fn damaged_file_journal() -> Place {
    let place = file_place();
    populate(&*place.open());
    flip_in_session(&place.path(), "retried");
    place
}

#[test]
fn skip_reads_every_intact_session_of_a_damaged_file_journal_and_names_the_damaged_one() {
    let place = damaged_file_journal();
    let url = &place.url;
    // Without skip: refused, with the way out in the command's own words.
    let out = bin(&["sessions", url]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("--on-corruption skip") && !err.contains("OnCorruption::"), "{err}");
    assert!(err.contains("stepjournal salvage"), "{err}");

    let out = bin(&["sessions", url, "--on-corruption", "skip"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let table = String::from_utf8(out.stdout.clone()).unwrap();
    for s in INTACT {
        assert!(table.lines().any(|l| l.starts_with(&format!("{s} "))), "{s} missing: {table}");
    }
    assert!(!table.contains("retried"), "{table}");
    // Read around its damage, the journal's lock is not asked: an open run says why it is
    // neither running nor crashed.
    let stuck = table.lines().find(|l| l.starts_with("stuck ")).unwrap();
    assert!(stuck.contains(" open "), "{table}");
    assert!(table.contains("open: the journal was read around its damage"), "{table}");
    let err = stderr(&out);
    assert!(err.contains("damaged: session retried: segment "), "{err}");
    assert!(err.contains(" at byte "), "{err}");

    // show of an intact session works as on an intact journal; of the damaged one, exit 1.
    let shown = bin_ok(&["show", url, "stuck", "--on-corruption", "skip"], 0);
    assert!(shown.starts_with("session stuck: 8 events"), "{shown}");
    let out = bin(&["show", url, "retried", "--on-corruption", "skip"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("damaged: session retried"), "{}", stderr(&out));
    bin_ok(&["calls", url, "stuck", "--on-corruption", "skip"], 0);
    bin_ok(&["plan", url, "stuck", "--entry", "wake", "--on-corruption", "skip"], 0);

    let out = bin(&["export", url, "--on-corruption", "skip"]);
    assert_eq!(out.status.code(), Some(1));
    let lines = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(!lines.contains("\"session\":\"retried\""));
    for s in INTACT {
        assert!(lines.contains(&format!("\"session\":\"{s}\"")), "{s}");
    }
    let out = bin(&["stats", url, "--on-corruption", "skip", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["sessions"], 5);
}

#[test]
fn salvage_copies_every_intact_batch_and_cuts_the_damaged_session_without_writing_the_source() {
    let place = damaged_file_journal();
    let before = tree_bytes(&place.path());
    for target in [file_place(), sqlite_place()] {
        let out = bin(&["salvage", &place.url, "--to", &target.url]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let said = String::from_utf8(out.stdout.clone()).unwrap();
        assert!(said.contains("5 sessions whole, 1 cut at their first damage"), "{said}");
        assert!(said.contains("cut: session retried kept its first "), "{said}");
        assert!(stderr(&out).contains("damaged: session retried: segment "), "{}", stderr(&out));
        // The copy is a clean store holding every intact session, event for event.
        assert!(bin_ok(&["verify", &target.url], 0).ends_with("clean: no problems found\n"));
        for s in INTACT {
            let src = bin_ok(&["show", &place.url, s, "--json", "--on-corruption", "skip"], 0);
            assert_eq!(bin_ok(&["show", &target.url, s, "--json"], 0), src, "{s}");
        }
        // Salvaging into a store that holds sessions is refused.
        let again = bin(&["salvage", &place.url, "--to", &target.url]);
        assert_eq!(again.status.code(), Some(2));
        // In salvage's words (the defect: it spoke of importing an export).
        let err = stderr(&again);
        assert!(err.contains("refusing to salvage into") && err.contains("nothing was salvaged"));
        assert!(!err.contains("import"), "{err}");
    }
    assert_eq!(tree_bytes(&place.path()), before, "the source was written");
    let same = bin(&["salvage", &place.url, "--to", &place.url]);
    assert_eq!(same.status.code(), Some(2));
}

#[test]
fn skip_on_sqlite_leaves_out_a_session_whose_record_does_not_decode() {
    let place = sqlite_place();
    populate(&*place.open());
    rusqlite::Connection::open(place.path())
        .unwrap()
        .execute("UPDATE events SET record = X'00010203' WHERE session = 'retried' AND seq = 2", [])
        .unwrap();
    // Without skip, an export meeting the damage after two whole sessions says what it wrote
    // (the defect: only the damage, leaving the reader to guess what the output holds).
    let out = bin(&["export", &place.url]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("stopped after writing 2 whole session(s)"), "{err}");
    let written = String::from_utf8(out.stdout).unwrap();
    let sessions: std::collections::BTreeSet<String> = written
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["session"].to_string())
        .collect();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    skip_and_salvage_a_damaged_row(&place);
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn skip_on_postgres_leaves_out_a_session_whose_record_does_not_decode() {
    let place = pg_place();
    populate(&*place.open());
    let schema = place.url.rsplit_once("schema=").unwrap().1.to_owned();
    let base = std::env::var("STEPJOURNAL_PG_URL").unwrap();
    let mut client = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!(
            "UPDATE \"{schema}\".events SET record = '\\x00010203' \
             WHERE session = 'retried' AND seq = 2"
        ))
        .unwrap();
    skip_and_salvage_a_damaged_row(&place);
}

/// `retried`'s row at seq 2 does not decode: skip leaves it out, salvage cuts it there.
fn skip_and_salvage_a_damaged_row(place: &Place) {
    let out = bin(&["sessions", &place.url]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = bin(&["sessions", &place.url, "--on-corruption", "skip", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let rows = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(rows.lines().count(), 5, "{rows}");
    assert!(stderr(&out).contains("damaged: session retried"), "{}", stderr(&out));
    let target = file_place();
    let out = bin(&["salvage", &place.url, "--to", &target.url]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = String::from_utf8(out.stdout.clone()).unwrap();
    // The damaged session is cut at its first damaged row: seq 0 and 1 are kept.
    assert!(said.contains("cut: session retried kept its first 2 events"), "{said}");
    assert_eq!(bin_ok(&["sessions", &target.url, "--json"], 0).lines().count(), 6);
    assert!(bin_ok(&["verify", &target.url], 0).ends_with("clean: no problems found\n"));
}
