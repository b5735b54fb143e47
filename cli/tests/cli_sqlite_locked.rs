//! An SQLite runtime frozen inside a write transaction (a child process that took the write
//! lock, stopped with SIGSTOP). The defects: `stop` and `delete` waited out the busy timeout
//! and said only "database is locked", and `sessions` called a session whose lease had lapsed
//! "crashed" while the process holding the database, which may be its runtime, was frozen.
//! Now a refused write names the process holding the lock and how long it waited, and such a
//! session is `locked`, neither running nor crashed.

mod cli_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use cli_support::*;
use rustix::process::{Pid, Signal, kill_process};
use stepjournal::writer::block_on;
use stepjournal::{Journal, JournalOptions, RecoverOptions, Tools};
use stepjournal_backends::JournalStore;
use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};
use stepjournal_codec::{SessionId, Stamped, UnixMillis};

/// The environment variable naming the database the child locks.
const HOLD: &str = "STEPJOURNAL_TEST_HOLD_DB";

/// The child: takes the write lock of the database `HOLD` names in a transaction it never ends,
/// says `holding`, and waits for its standard input to close. It is this test binary run again
/// with this test's name (ignored otherwise).
#[test]
#[ignore = "the lock-holding child process of the other tests of this file, which run it"]
fn child_holding_the_write_lock() {
    let db = std::env::var_os(HOLD).expect("run by this file's tests, which set the database");
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "holding").unwrap();
    out.flush().unwrap();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// The child, frozen (SIGSTOP) inside its write transaction; thawed and killed when dropped.
struct Frozen {
    child: Child,
}

impl Frozen {
    fn hold(db: &std::path::Path) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["child_holding_the_write_lock", "--exact", "--ignored", "--nocapture"])
            .env(HOLD, db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line == "holding" {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(60)).expect("the child never took the write lock");
        let frozen = Frozen { child };
        kill_process(frozen.pid(), Signal::STOP).unwrap();
        frozen
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32).unwrap()
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = kill_process(self.pid(), Signal::CONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_frozen_write_transaction_is_named_by_every_refused_write_and_no_session_is_called_crashed() {
    let place = sqlite_place();
    populate(&*place.open());
    let db = place.path();
    let url = place.url.clone();
    let listed = bin_ok(&["sessions", &url, "--json"], 0);
    assert!(listed.contains("\"session\":\"stuck\"") && listed.contains("\"state\":\"crashed\""));
    // A store opened before the freeze, waiting 100 ms for the lock.
    let mut options = SqliteOptions::default();
    options.busy_timeout = Duration::from_millis(100);
    let store = Arc::new(SqliteStore::open(&db, options.clone()).unwrap());
    let stuck = SessionId::new("stuck").unwrap();
    let tail = store.tail(&stuck).unwrap();

    let frozen = Frozen::hold(&db);
    let pid = frozen.child.id();
    let named = format!("process {pid} holds its write lock");

    // The library: an append and a delete refused, naming the holder and the wait; an open
    // (which checks the schema under the write lock) too.
    let batch = [Stamped::at(UnixMillis(T0), message("more"))];
    let err = store.append(&stuck, tail, &batch, stepjournal_backends::Durability::Synced);
    let err = err.unwrap_err().to_string();
    assert!(err.contains(&named) && err.contains("waited 100 ms"), "{err}");
    let err = store.delete(&stuck).unwrap_err().to_string();
    assert!(err.contains(&named) && err.contains("waited 100 ms"), "{err}");
    let err = SqliteStore::open(&db, options).unwrap_err().to_string();
    assert!(err.contains(&named), "{err}");
    // A runtime's `recover_all`: the crashed-looking session fails, the holder named.
    let registry = Arc::new(stepjournal_recovery::MemoryRegistry::new());
    let journal = Journal::new(store.clone(), registry, JournalOptions::new()).unwrap();
    let tools = Tools::new();
    let recovering = journal.recover_all(&tools, RecoverOptions::new(), |_, _| async {});
    let report = block_on(recovering).map_err(|e| e.to_string());
    let failed = match &report {
        Ok(report) => report.failed.iter().map(|(s, why)| format!("{s}: {why}")).collect(),
        Err(e) => vec![e.clone()],
    };
    assert!(failed.iter().any(|f| f.contains(&named)), "{report:?}");

    // `sessions`: the lapsed session is `locked`, the holder named; not `crashed`.
    let listed = bin_ok(&["sessions", &url, "--json"], 0);
    let row = listed.lines().find(|l| l.contains("\"session\":\"stuck\"")).unwrap();
    let row: serde_json::Value = serde_json::from_str(row).unwrap();
    assert_eq!(row["state"], "locked", "{row}");
    assert_eq!(row["lock_holder_pid"], pid, "{row}");
    assert!(row["locked_why"].as_str().unwrap().contains(&format!("process {pid}")), "{row}");
    let table = bin_ok(&["sessions", &url], 0);
    assert!(table.contains(&format!("locked: process {pid} held the database's write lock")));
    let line = table.lines().find(|l| l.starts_with("stuck ")).unwrap();
    assert!(line.contains(" locked ") && !line.contains("crashed"), "{table}");
    // A finished session is judged by its log alone.
    assert!(listed.contains("\"state\":\"completed\""), "{listed}");
    let page = bin_ok(&["view", &url, "stuck", "-o", "-"], 0);
    assert!(page.contains("<header data-state=\"locked\">"), "the page agrees with sessions");

    // The commands: refused after the busy timeout, naming the holder and the wait.
    for args in [vec!["stop", &url, "stuck"], vec!["delete", &url, "stuck", "--yes"]] {
        let out = bin(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let said = stderr(&out);
        println!("{}: {said}", args[0]);
        assert!(said.contains(&named) && said.contains("waited 5000 ms"), "{args:?}: {said}");
    }

    // Once the holder is gone, the store writes again (a refusal for the lock never poisons).
    drop(frozen);
    store.append(&stuck, tail, &batch, stepjournal_backends::Durability::Synced).unwrap();
    let listed = bin_ok(&["sessions", &url, "--json"], 0);
    let row = listed.lines().find(|l| l.contains("\"session\":\"stuck\"")).unwrap();
    assert!(row.contains("\"state\":\"crashed\""), "{row}");
}
