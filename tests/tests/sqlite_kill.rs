//! A process appending to SQLite killed with SIGKILL mid-loop: every append it acknowledged is
//! there when the file is opened again, dense and intact, and appends go on from the tail.
#![cfg(feature = "sqlite")]
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use stepjournal_backends::JournalStore;
use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};
use stepjournal_codec::{Seq, SessionId};
use stepjournal_tests::sample::numbered;
use stepjournal_tests::watchdog::hung;

/// Runs the child until it has acknowledged `acks` appends, kills it, and returns the last
/// acknowledged tail (every line it printed, including those still in the pipe).
fn run_and_kill(db: &std::path::Path, session: &str, acks: usize) -> u64 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sqlite_child"))
        .args(["append-loop", db.to_str().unwrap(), session])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let limit = Duration::from_secs(30);
    while lines.len() < acks {
        match rx.recv_timeout(limit) {
            Ok(line) => lines.push(line),
            Err(RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let what = format!("the child's next acknowledgement after {}", lines.len());
                panic!("{}", hung(&what, limit));
            }
            Err(RecvTimeoutError::Disconnected) => {
                let _ = child.kill();
                panic!("the child stopped after acknowledging {} of {acks} appends", lines.len());
            }
        }
    }
    child.kill().unwrap(); // SIGKILL on Unix
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child was killed, not finished: {status}");
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    let mut tail = None;
    for line in &lines {
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(parts.len(), 3, "unexpected line {line:?}");
        let (first, next): (u64, u64) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
        if let Some(t) = tail {
            assert_eq!(first, t, "acknowledged appends are contiguous");
        }
        tail = Some(next);
    }
    tail.unwrap()
}

#[test]
fn every_acknowledged_append_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("killed.sqlite");
    let s = SessionId::new("killed").unwrap();
    let mut acked = 0;
    for acks in [5, 40, 17] {
        acked = run_and_kill(&db, "killed", acks);
        let store = SqliteStore::open(&db, SqliteOptions::default()).unwrap();
        let tail = store.tail(&s).unwrap();
        assert!(tail >= Seq(acked), "acknowledged up to {acked}, found tail {tail}");
        // An append in flight at the kill either landed whole or not at all: at most 3 more.
        assert!(tail.get() <= acked + 3, "tail {tail} is past any batch in flight after {acked}");
        let log = store.read_all(&s).unwrap();
        assert_eq!(log.len() as u64, tail.get(), "the log is dense up to its tail");
        for r in &log {
            assert_eq!(r.event, numbered(r.seq.get()), "seq {} holds another event", r.seq);
        }
    }
    assert!(acked >= 62, "three runs acknowledged at least 62 appends' worth of events");
}
