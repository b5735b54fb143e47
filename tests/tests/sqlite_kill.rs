//! A process appending to SQLite killed with SIGKILL mid-loop: every append it acknowledged is
//! there when the file is opened again, dense and intact, and appends go on from the tail.
#![cfg(feature = "sqlite")]

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

/// A small fixed-seed generator: the rounds are random but the same on every run.
struct Draws(u64);

impl Draws {
    fn below(&mut self, n: u64) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }
}

/// Starts the child in `mode`, reads `acks` acknowledgement lines, waits `pause_us` (a random
/// moment within the appends that follow), kills it with SIGKILL and returns every line it
/// acknowledged.
fn kill_after(
    db: &std::path::Path,
    mode: &str,
    arg: &str,
    acks: usize,
    pause_us: u64,
) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sqlite_child"))
        .args([mode, db.to_str().unwrap(), arg])
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
    let limit = Duration::from_secs(30);
    let mut lines = Vec::new();
    while lines.len() < acks {
        match rx.recv_timeout(limit) {
            Ok(line) => lines.push(line),
            Err(e) => {
                let _ = child.kill();
                panic!(
                    "{} ({e})",
                    hung(&format!("ack {} of the {mode} child", lines.len()), limit)
                );
            }
        }
    }
    std::thread::sleep(Duration::from_micros(pause_us));
    child.kill().unwrap();
    assert!(!child.wait().unwrap().success());
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    lines
}

#[test]
fn acknowledged_appends_survive_sigkill_at_random_moments_sync_and_async() {
    // The audit's SIGKILL loop, bounded: rounds of a child appending (one session through the
    // sync path, or eight sessions with every append in flight at once through the committer
    // thread), killed after a random number of acknowledgements and a random pause. After
    // each, every acknowledged append is there, nothing is duplicated, and the logs are dense.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("random-kills.sqlite");
    let mut draws = Draws(0x5eed_1234_abcd_0042);
    let mut acked: std::collections::BTreeMap<String, u64> = Default::default();
    for round in 0..8 {
        let acks = 1 + draws.below(40) as usize;
        let pause = draws.below(3_000);
        let (mode, arg) =
            if round % 2 == 0 { ("append-loop", "sync") } else { ("async-loop", "8") };
        for line in kill_after(&db, mode, arg, acks, pause) {
            let parts: Vec<&str> = line.split_whitespace().collect();
            let (session, next) = match (mode, parts.as_slice()) {
                ("append-loop", ["acked", _, next]) => ("sync".to_owned(), next.parse().unwrap()),
                ("async-loop", ["acked", i, _, next]) => {
                    (format!("async-{i}"), next.parse().unwrap())
                }
                _ => panic!("unexpected line {line:?} from the {mode} child"),
            };
            let seen = acked.entry(session).or_default();
            assert!(next > *seen, "acknowledgements of a session only move forward");
            *seen = next;
        }
        let store = SqliteStore::open(&db, SqliteOptions::default()).unwrap();
        for (name, &acked) in &acked {
            let s = SessionId::new(name.as_str()).unwrap();
            let tail = store.tail(&s).unwrap();
            assert!(
                tail.get() >= acked,
                "round {round}: {name} acknowledged up to {acked}, tail {tail}"
            );
            assert!(
                tail.get() <= acked + 3,
                "round {round}: {name}'s tail {tail} is past one batch in flight"
            );
            let log = store.read_all(&s).unwrap();
            assert_eq!(log.len() as u64, tail.get(), "{name}'s log is dense up to its tail");
            for r in &log {
                assert_eq!(
                    r.event,
                    numbered(r.seq.get()),
                    "{name} seq {} is not its own event",
                    r.seq
                );
            }
            let head = store.head(&s).unwrap().unwrap();
            assert_eq!(head.tail, tail, "{name}'s head row agrees with its log");
        }
    }
    assert_eq!(acked.len(), 9, "the sync session and the eight async ones were all written");
}
