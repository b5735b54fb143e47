//! A password in a store URL appears in no output, error message or `Debug` text: the
//! command's, on every open failure and on success, and the library's.

mod cli_support;

use std::time::Duration;

use cli_support::*;
use stepjournal_backends::postgres::{PostgresOptions, PostgresStore};
use stepjournal_backends::{OpenOptions, StoreUrl, open_url};

const SECRET: &str = "s3cretpw";

/// Every command that opens a store, on `url`, with `file` an export for `import`.
fn every_command<'a>(url: &'a str, file: &'a str) -> Vec<Vec<&'a str>> {
    vec![
        vec!["sessions", url],
        vec!["show", url, "s-1"],
        vec!["plan", url, "s-1", "--entry", "wake"],
        vec!["verify", url],
        vec!["export", url],
        vec!["stats", url],
        vec!["stats", url, "--json"],
        vec!["verify", url, "--json"],
        vec!["import", file, "--to", url],
    ]
}

/// Runs every command on `url`; none may print the password, and each exits `code`.
fn assert_hidden_everywhere(url: &str, code: i32) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("one.jsonl");
    let place = file_place();
    populate(&*place.open());
    let export = bin_ok(&["export", &place.url, "stuck"], 0);
    std::fs::write(&file, export).unwrap();
    for args in every_command(url, file.to_str().unwrap()) {
        let out = bin(&args);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET), "{args:?}: {stdout}{stderr}");
        if args[0] == "import" {
            // An import into a server that works lands; only the other outcomes are checked.
            continue;
        }
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stdout}{stderr}");
    }
}

#[test]
fn no_open_error_shows_a_password_given_in_the_url() {
    // Defect: `stepjournal sessions 'postgres://postgres:s3cretpw@127.0.0.1:5999/test'` printed
    // the password on standard error: the open error quoted the URL as typed.
    for url in [
        // A refused port.
        "postgres://postgres:s3cretpw@127.0.0.1:5999/test",
        // A host name that does not resolve.
        "postgres://postgres:s3cretpw@no-such-host.invalid:5432/test?connect_timeout=2",
        // A malformed URL: the port is not a number.
        "postgres://postgres:s3cretpw@127.0.0.1:notaport/test",
        // The store's own parameters, malformed.
        "postgres://postgres:s3cretpw@127.0.0.1:5999/test?pool_size=none",
        "postgresql://postgres@127.0.0.1:5999/test?password=s3cretpw&statement_timeout=soon",
        "postgres://postgres@127.0.0.1:5999/test?password=s3c%zzretpw",
        // Not a URL this build opens.
        "mysql://root:s3cretpw@127.0.0.1/test",
        "postgres:s3cretpw@127.0.0.1:5999/test",
        "host=127.0.0.1 password=s3cretpw",
    ] {
        assert_hidden_everywhere(url, 2);
    }
}

#[test]
fn the_store_url_types_and_errors_hide_the_password_in_display_and_debug() {
    // Defect: `StoreUrl`'s `Debug` and `Display` showed the whole URL.
    let url = "postgres://postgres:s3cretpw@127.0.0.1:5999/test";
    let parsed = StoreUrl::parse(url).unwrap();
    assert!(!format!("{parsed} {parsed:?}").contains(SECRET));
    let mut options = PostgresOptions::default();
    options.connect_timeout = Duration::from_secs(2);
    assert!(!format!("{options:?}").contains(SECRET));
    for url in [url, "host=127.0.0.1 port=5999 password=s3cretpw", "host=h password='s3cretpw"] {
        let err = PostgresStore::connect(url, options.clone()).unwrap_err();
        assert!(!format!("{err} {err:?}").contains(SECRET), "{err} {err:?}");
        let err = open_url(url, OpenOptions::read_only()).map(|_| ()).unwrap_err();
        assert!(!format!("{err} {err:?}").contains(SECRET), "{err} {err:?}");
    }
}

/// The test server's URL with `s3cretpw` as the password of its user (the server trusts the
/// connection, so the password is not checked), in a fresh schema.
fn pg_url_with_password(place: &Place) -> String {
    let url = place.url.replacen("postgres@", "postgres:s3cretpw@", 1);
    assert!(url.contains(SECRET), "the test server's URL names the user `postgres`: {url}");
    url
}

#[test]
#[cfg_attr(
    not(stepjournal_pg),
    ignore = "STEPJOURNAL_PG_URL is not set: PostgreSQL tests need a server"
)]
fn no_output_or_error_shows_the_password_with_a_server_there() {
    // Defect: the store's URL was printed as typed in `stats`, `verify`, `sessions`, `import`
    // and every error naming the store.
    let place = pg_place();
    let url = pg_url_with_password(&place);
    let base = url.split('?').next().unwrap();
    // A database and a user that do not exist; a schema that holds no store (read-only opens
    // refuse it).
    for bad in [
        format!("{}/no_such_db_sj?connect_timeout=5", base.rsplit_once('/').unwrap().0),
        url.replacen("postgres:s3cretpw@", "no_such_user_sj:s3cretpw@", 1),
        url.clone(),
    ] {
        assert_hidden_everywhere(&bad, 2);
    }
    // Then a store that exists, with a session in it.
    populate(&*open_url(&url, OpenOptions::create()).unwrap());
    let out = bin(&["sessions", &url]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(SECRET) && !stderr(&out).contains(SECRET)
    );
    for args in [
        vec!["stats", &url],
        vec!["stats", &url, "--json"],
        vec!["verify", &url],
        vec!["verify", &url, "--json"],
        vec!["plan", &url, "stuck", "--entry", "wake"],
        vec!["show", &url, "no-such-session"],
    ] {
        let out = bin(&args);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(!text.contains(SECRET), "{args:?}: {text}");
        assert!(text.contains("postgres:***@"), "{args:?} names the store: {text}");
    }
    // The library's store, its errors and its read-only refusals.
    let store = PostgresStore::connect(&url, PostgresOptions::default()).unwrap();
    assert!(!format!("{store:?}").contains(SECRET), "{store:?}");
    let reader = open_url(&url, OpenOptions::read_only()).unwrap();
    let s = stepjournal_codec::SessionId::new("x").unwrap();
    let err = reader.delete(&s).unwrap_err();
    assert!(!format!("{err} {err:?}").contains(SECRET), "{err} {err:?}");
}
