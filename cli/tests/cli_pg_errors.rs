//! PostgreSQL's errors reach the operator with their cause: the server's message and SQLSTATE,
//! or the OS error under a failed connection.

mod cli_support;

use cli_support::*;

fn failing(args: &[&str]) -> String {
    let out = bin(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    err
}

#[test]
fn a_refused_port_or_an_unknown_host_names_the_os_error() {
    // Defect: a refused port or an unknown host showed only "error connecting to server".
    let err = failing(&["sessions", "postgres://postgres@127.0.0.1:1/test"]);
    assert!(err.contains("error connecting to server: ") && err.contains("refused"), "{err}");
    let err = failing(&["sessions", "postgres://postgres@no-such-host.invalid/test"]);
    let cause = err.split("error connecting to server").nth(1).unwrap_or_default();
    assert!(cause.trim_start_matches(':').trim().len() > 3, "no cause after the kind: {err}");
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_missing_database_an_unknown_user_and_a_nul_name_the_servers_message_and_sqlstate() {
    // Defect: a missing database, an unknown user and a NUL in a string showed only
    // "db error".
    let place = pg_place();
    let (base, query) = place.url.split_once('?').unwrap();
    let server = base.rsplit_once('/').unwrap().0;
    let err = failing(&["sessions", &format!("{server}/no_such_db_sj?{query}")]);
    assert!(err.contains(r#"database "no_such_db_sj" does not exist"#), "{err}");
    assert!(err.contains("SQLSTATE 3D000"), "{err}");
    let user = place.url.replacen("postgres@", "no_such_user_sj@", 1);
    let err = failing(&["sessions", &user]);
    assert!(err.contains(r#"role "no_such_user_sj" does not exist"#), "{err}");
    assert!(err.contains("SQLSTATE 28000"), "{err}");
    // A session id with a NUL: the export is valid JSON, which the server used to refuse ("db
    // error"); the session-id rule refuses it before anything reaches the server, naming the line.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nul.jsonl");
    let line =
        r#"{"type":"message","role":"user","text":"hi","session":"a\u0000b","seq":0,"at":1}"#;
    std::fs::write(&file, format!("{{\"format\":\"stepjournal-export\",\"version\":1}}\n{line}\n"))
        .unwrap();
    let err = failing(&["import", file.to_str().unwrap(), "--to", &place.url]);
    assert!(err.contains("line 2") && err.contains("U+0000"), "{err}");
    assert!(!err.contains("db error"), "{err}");
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn a_mistyped_schema_is_refused_by_the_commands_that_act_and_never_created() {
    // The defect: `stop`, `approve` and `delete` on a mistyped `?schema=` created that schema and
    // its tables (`delete --older-than 1d --yes` then said "no session to delete", exit 0).
    let place = pg_place();
    for args in [
        vec!["stop", &place.url, "s1"],
        vec!["approve", &place.url, "s1", "c1"],
        vec!["deny", &place.url, "s1", "c1"],
        vec!["answer", &place.url, "s1", "c1", "--output", "{}"],
        vec!["delete", &place.url, "s1", "--yes"],
        vec!["delete", &place.url, "--older-than", "1d", "--yes"],
    ] {
        let err = failing(&args);
        assert!(err.contains("holds no stepjournal store"), "{args:?}: {err}");
        assert!(err.contains("import"), "{args:?} says what creates a store: {err}");
    }
    // Still no store there: a read-only open finds none (a created schema would hold one).
    let err = failing(&["sessions", &place.url]);
    assert!(err.contains("holds no stepjournal store"), "{err}");
    // `import` creates it.
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("empty.jsonl");
    std::fs::write(&export, "{\"format\":\"stepjournal-export\",\"version\":1}\n").unwrap();
    bin_ok(&["import", "--to", &place.url, export.to_str().unwrap()], 0);
    bin_ok(&["sessions", &place.url], 0);
}
