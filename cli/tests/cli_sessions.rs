//! `stepjournal sessions` and `stepjournal show` through the binary, on every backend in the
//! build, against golden files.

mod cli_support;

use cli_support::*;
use stepjournal_backends::{OpenOptions, open_url};
use stepjournal_codec::SessionId;
use stepjournal_codec::json::record_to_export_line;

#[test]
fn sessions_lists_every_fixture_session_the_same_on_every_backend() {
    for place in populated() {
        let table = mask_ages(&bin_ok(&["sessions", &place.url], 0));
        golden("sessions.txt", &table);
        assert!(!table.contains('\x1b'), "{}: colour when not on a terminal", place.name);
    }
}

#[test]
fn sessions_states_and_unresolved_calls_are_as_the_logs_say() {
    let place = file_place();
    populate(&*place.open());
    let json = bin_ok(&["sessions", &place.url, "--json"], 0);
    let rows: Vec<serde_json::Value> =
        json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let by = |id: &str| rows.iter().find(|r| r["session"] == id).unwrap().clone();
    assert_eq!(rows.len(), 6);
    assert_eq!(by("finished")["state"], "completed");
    // Nothing holds its open run: no runtime holds the journal's lock.
    assert_eq!(by("stuck")["state"], "crashed");
    assert_eq!(by("stuck")["unresolved"], serde_json::json!(["c1", "c2"]));
    assert_eq!(by("stuck")["saved_step"], 1);
    assert_eq!(by("suspended")["state"], "suspended");
    assert_eq!(by("suspended")["unresolved"], serde_json::json!(["c1"]));
    assert_eq!(by("stopped")["state"], "stopped");
    assert_eq!(by("stopped")["unresolved"], serde_json::json!([]));
    assert_eq!(by("failed")["state"], "failed");
    assert_eq!(by("retried")["state"], "completed");
    assert_eq!(by("finished")["events"], 10);
    assert_eq!(by("finished")["last_append"], "2025-01-15T09:01:09.000Z");
}

#[test]
fn sessions_filters_by_state_and_by_time() {
    let place = file_place();
    populate(&*place.open());
    let open = bin_ok(&["sessions", &place.url, "--state", "crashed"], 0);
    assert_eq!(open.lines().count(), 2, "{open}");
    assert!(open.lines().nth(1).unwrap().starts_with("stuck "), "{open}");
    // "stopped" (k = 3) and later sessions started at 09:03 or after.
    let late = bin_ok(&["sessions", &place.url, "--since", "2025-01-15T09:03:00Z", "--json"], 0);
    let ids: Vec<String> = late
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["session"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, ["stopped", "stuck", "suspended"]);
    let none = bin_ok(&["sessions", &place.url, "--since", "1h", "--state", "failed"], 0);
    assert!(none.contains("no session matches"), "{none}");
}

#[test]
fn a_bad_since_or_store_is_an_error_naming_it() {
    let place = file_place();
    populate(&*place.open());
    let out = bin(&["sessions", &place.url, "--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--since") && stderr(&out).contains("yesterday"),
        "{}",
        stderr(&out)
    );
    let out = bin(&["sessions", "file:/nonexistent/journal"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/nonexistent/journal"), "{}", stderr(&out));
    let out = bin(&["sessions", "mysql://db"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("mysql://db"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn show_prints_the_timeline_the_same_on_every_backend() {
    for place in populated() {
        for session in ["stuck", "retried", "finished", "suspended", "stopped"] {
            let text = bin_ok(&["show", &place.url, session], 0);
            golden(&format!("show-{session}.txt"), &text);
            assert!(!text.contains('\x1b'), "{}: colour when not on a terminal", place.name);
        }
    }
}

#[test]
fn show_json_prints_the_sessions_export_lines() {
    for place in populated() {
        let text = bin_ok(&["show", &place.url, "stuck", "--json"], 0);
        let store = open_url(&place.url, OpenOptions::read_only()).unwrap();
        let expect: String = store
            .read_all(&SessionId::new("stuck").unwrap())
            .unwrap()
            .iter()
            .map(|r| record_to_export_line(r) + "\n")
            .collect();
        assert_eq!(text, expect, "{}", place.name);
    }
}

#[test]
fn show_of_a_missing_session_exits_2_naming_it() {
    let place = file_place();
    populate(&*place.open());
    let out = bin(&["show", &place.url, "nobody"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("`nobody`") && err.contains(&place.url), "{err}");
}

#[test]
fn show_uses_colour_only_when_asked_for_a_terminal() {
    use clap::Parser;
    use stepjournal_cli::{Cli, Terminal, run_with};
    let place = file_place();
    populate(&*place.open());
    let mut colour = Vec::new();
    let cli = Cli::parse_from(["stepjournal", "show", &place.url, "stuck"]);
    run_with(
        cli,
        &mut colour,
        &mut Vec::new(),
        Terminal { colour: true, progress: false, width: None },
    )
    .unwrap();
    let colour = String::from_utf8(colour).unwrap();
    assert!(colour.contains("\x1b["), "{colour}");
    let plain = bin_ok(&["show", &place.url, "stuck"], 0);
    let stripped = strip_ansi(&colour);
    assert_eq!(stripped, plain);
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn every_command_has_help_with_an_example() {
    for cmd in [
        "sessions", "show", "calls", "plan", "view", "verify", "export", "import", "stats",
        "salvage", "stop", "answer", "approve", "deny", "delete",
    ] {
        let out = bin_ok(&[cmd, "--help"], 0);
        assert!(out.contains(&format!("stepjournal {cmd} ")), "{cmd} --help: {out}");
    }
    let top = bin_ok(&["--help"], 0);
    assert!(top.contains("Examples:") && top.contains("stepjournal sessions"), "{top}");
}

#[test]
fn a_stored_time_after_the_year_9999_is_shown_as_invalid() {
    // Defect: a stored `at` of u64::MAX was shown as the year 584556019 in `sessions` and
    // `show` (readers take what is stored; only import refuses such a time).
    use stepjournal_backends::Durability;
    use stepjournal_codec::{Seq, Stamped, UnixMillis};
    let place = file_place();
    let store = place.open();
    let s = SessionId::new("late").unwrap();
    let events: Vec<Stamped> =
        finished()[0].iter().map(|e| Stamped::at(UnixMillis(u64::MAX), e.clone())).collect();
    store.append(&s, Seq(0), &events, Durability::Synced).unwrap();
    drop(store);
    let table = bin_ok(&["sessions", &place.url], 0);
    assert!(table.contains("invalid time (18446744073709551615 ms)"), "{table}");
    assert!(!table.contains("584556019"), "{table}");
    let json: serde_json::Value =
        serde_json::from_str(bin_ok(&["sessions", &place.url, "--json"], 0).trim()).unwrap();
    assert_eq!(json["last_append"], serde_json::Value::Null);
    assert_eq!(json["last_append_ms"], u64::MAX);
    let shown = bin_ok(&["show", &place.url, "late"], 0);
    assert!(shown.contains("last append invalid time (18446744073709551615 ms)"), "{shown}");
    assert_eq!(shown.matches("invalid time (18446744073709551615 ms)").count(), 3, "{shown}");
    assert!(!shown.contains("584556019"), "{shown}");
}

#[test]
fn show_wraps_long_lines_to_the_terminals_width() {
    use clap::Parser;
    use stepjournal_cli::{Cli, Terminal, run_with};
    let place = file_place();
    populate(&*place.open());
    let mut wrapped = Vec::new();
    let cli = Cli::parse_from(["stepjournal", "show", &place.url, "stuck"]);
    run_with(
        cli,
        &mut wrapped,
        &mut Vec::new(),
        Terminal { colour: false, progress: false, width: Some(72) },
    )
    .unwrap();
    let wrapped = String::from_utf8(wrapped).unwrap();
    let plain = bin_ok(&["show", &place.url, "stuck"], 0);
    assert!(plain.lines().any(|l| l.chars().count() > 72), "the fixture has long lines");
    for line in wrapped.lines() {
        assert!(line.chars().count() <= 72, "{line:?}");
    }
    let words = |t: &str| t.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(words(&wrapped), words(&plain), "wrapping lost or changed text");
}

#[test]
fn a_limit_of_zero_rows_is_refused() {
    // The defect: `sessions --limit 0` printed a header and no row, exit 0.
    let place = file_place();
    populate(&*place.open());
    let out = bin(&["sessions", &place.url, "--limit", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--limit"), "{}", stderr(&out));
    let table = bin_ok(&["sessions", &place.url, "--limit", "1"], 0);
    assert_eq!(table.lines().count(), 2, "a header and one row: {table}");
}
