//! `stepjournal import` refusing what it cannot take whole, each refusal naming its line and
//! writing nothing: bytes that are not UTF-8, JSON nested too deep, times out of range.

mod cli_support;

use std::path::{Path, PathBuf};

use cli_support::*;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The export of the fixture's `stuck` session, as lines (header first).
fn stuck_export() -> Vec<String> {
    let source = file_place();
    populate(&*source.open());
    bin_ok(&["export", &source.url, "stuck"], 0).lines().map(str::to_owned).collect()
}

/// Imports `bytes` into a new file journal; returns the exit status and standard error, and
/// checks nothing was written.
fn import_refused(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "in.jsonl", bytes);
    let target = file_place();
    let out = bin(&["import", file.to_str().unwrap(), "--to", &target.url]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nothing was imported"), "{err}");
    assert!(!target.path().exists(), "the target was created: {err}");
    err
}

#[test]
fn a_line_that_is_not_utf8_is_refused_naming_its_line() {
    // Defect: invalid UTF-8 in an import was reported as "stream did not contain valid UTF-8",
    // with no line number, while every other import error names its line.
    let lines = stuck_export();
    let mut bytes = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if i == 3 {
            bytes.extend_from_slice(&line.as_bytes()[..20]);
            bytes.extend_from_slice(b"\xff\xfe");
            bytes.extend_from_slice(&line.as_bytes()[20..]);
        } else {
            bytes.extend_from_slice(line.as_bytes());
        }
        bytes.push(b'\n');
    }
    let err = import_refused(&bytes);
    assert!(err.contains("in.jsonl line 4:") && err.contains("not UTF-8"), "{err}");
    assert!(err.contains("byte 21"), "{err}");
}

/// An export of one stuck session whose call's `args` nest `depth` arrays deep.
fn deep_args_export(depth: usize) -> String {
    let args = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let lines = stuck_export();
    let mut out = String::new();
    for line in &lines {
        let line = line.replacen(
            r#""args":{"cents":4200,"card":"visa-1234"}"#,
            &format!(r#""args":{args}"#),
            1,
        );
        out.push_str(&line);
        out.push('\n');
    }
    assert!(out.contains(&args), "the fixture's charge_card call was found");
    out
}

#[test]
fn json_nested_too_deep_is_refused_naming_its_line_depth_and_limit() {
    // Defect: a 100,000-deep `args` value was imported, then read back as `null`, so `plan`
    // reported "null is not of type object".
    let err = import_refused(deep_args_export(100_000).as_bytes());
    assert!(err.contains("in.jsonl line 4:"), "{err}");
    assert!(err.contains("nests 100000 arrays and objects deep; the limit is 100"), "{err}");
    let err = import_refused(deep_args_export(101).as_bytes());
    assert!(err.contains("nests 101 "), "{err}");
}

#[test]
fn json_as_deep_as_the_limit_is_imported_and_read_back_as_it_was() {
    // The limit's edge: a value exactly as deep as the limit goes through whole (export,
    // import, a schema check).
    let dir = tempfile::tempdir().unwrap();
    let export = deep_args_export(100);
    let file = write(dir.path(), "in.jsonl", export.as_bytes());
    let target = file_place();
    bin_ok(&["import", file.to_str().unwrap(), "--to", &target.url], 0);
    assert_eq!(bin_ok(&["export", &target.url], 0), export);
    let tools = write(
        dir.path(),
        "tools.json",
        br#"{"charge_card": {"replay": "unsafe", "input_schema": {"type": "array"}},
             "set_preference": {"replay": "safe", "input_schema": {"type": "object"}}}"#,
    );
    let plan = bin_ok(
        &["plan", &target.url, "stuck", "--entry", "wake", "--tools", tools.to_str().unwrap()],
        0,
    );
    assert!(!plan.contains("null is not of type"), "{plan}");
    assert!(!plan.contains("validation") && !plan.contains("arguments fail"), "{plan}");
    // A tools file nested too deep is refused the same way.
    let deep = format!("{{\"t\":{}{}}}", "[".repeat(150), "]".repeat(150));
    let deep_tools = write(dir.path(), "deep.json", deep.as_bytes());
    let out = bin(&[
        "plan",
        &target.url,
        "stuck",
        "--entry",
        "wake",
        "--tools",
        deep_tools.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("nests 151 arrays and objects deep; the limit is 100"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_scenario_with_json_nested_too_deep_is_refused_saying_so() {
    // Defect: a scenario's log took JSON of any depth.
    let dir = tempfile::tempdir().unwrap();
    let args = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
    let scenario = format!(
        r#"{{"log":[{{"type":"run_started","run":"r","entry":{{"kind":"wake"}}}},{{"type":"reply_committed","step":1,"checkpoint":"cp","calls":[{{"call":"c","tool":"t","args":{args}}}]}}],"tools":{{}},"entry":{{"kind":"wake"}}}}"#
    );
    let file = write(dir.path(), "deep.json", scenario.as_bytes());
    let out = bin(&["plan", "--scenario", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("nests 5005 arrays and objects deep; the limit is 100"), "{err}");
}

#[test]
fn a_time_after_the_year_9999_is_refused_naming_its_line() {
    // Defect: `at` = u64::MAX was imported, then shown as the year 584556019.
    let lines = stuck_export();
    for at in [u64::MAX, 253_402_300_800_000] {
        let mut text = String::new();
        for (i, line) in lines.iter().enumerate() {
            let line = if i == 2 {
                let (head, _) = line.rsplit_once(r#","at":"#).unwrap();
                format!(r#"{head},"at":{at}}}"#)
            } else {
                line.clone()
            };
            text.push_str(&line);
            text.push('\n');
        }
        let err = import_refused(text.as_bytes());
        assert!(err.contains("in.jsonl line 3:"), "{err}");
        assert!(err.contains(&format!("`at` {at} is after 9999-12-31T23:59:59.999Z")), "{err}");
    }
}

/// Imports the fixture's `stuck` session into `url`, which must be refused naming `needle`.
fn import_into_refused(url: &str, needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut text = stuck_export().join("\n");
    text.push('\n');
    let file = write(dir.path(), "in.jsonl", text.as_bytes());
    let out = bin(&["import", file.to_str().unwrap(), "--to", url]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is not a stepjournal store") && err.contains(needle), "{err}");
    assert!(err.contains("nothing was changed"), "{err}");
}

#[test]
fn an_import_into_another_applications_database_or_directory_is_refused_unchanged() {
    // Defect: `import ... --to sqlite:otherapp.db` switched another application's database to
    // WAL and added tables, and `--to file:DIR` wrote into a directory full of unrelated files,
    // both with exit 0.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("otherapp.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT);
             INSERT INTO accounts (owner) VALUES ('ada');",
        )
        .unwrap();
    let before = std::fs::read(&db).unwrap();
    import_into_refused(&format!("sqlite:{}", db.display()), "table `accounts`");
    assert_eq!(std::fs::read(&db).unwrap(), before, "the database was changed");
    assert!(!dir.path().join("otherapp.db-wal").exists());
    // A directory of other files.
    let files = dir.path().join("documents");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("report.odt"), b"mine").unwrap();
    import_into_refused(&format!("file:{}", files.display()), "`report.odt`");
    let left: Vec<_> = std::fs::read_dir(&files).unwrap().collect();
    assert_eq!(left.len(), 1, "nothing was written: {left:?}");
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn an_import_into_a_postgres_schema_of_other_tables_is_refused_unchanged() {
    // Defect: a schema holding another application's tables got the journal's tables added.
    let place = pg_place();
    let schema = place.url.rsplit_once("schema=").unwrap().1.to_owned();
    let base = std::env::var("STEPJOURNAL_PG_URL").unwrap();
    let mut client = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!(
            "CREATE SCHEMA \"{schema}\"; CREATE TABLE \"{schema}\".invoices (id INT)"
        ))
        .unwrap();
    import_into_refused(&place.url, "table `invoices`");
    let tables: i64 = client
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
            &[&schema],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "nothing was added to the schema");
    client.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE")).unwrap();
}
