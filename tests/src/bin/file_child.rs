//! A child process for the file backend's process tests.
//!
//! - `file_child append DIR SEGMENT_SIZE SESSIONS`: opens the journal in DIR as its writer, prints
//!   `ready`, then appends synced batches to sessions 0..SESSIONS forever, each at the session's
//!   tail, printing `S NEXT` (session number, its new tail) after each acknowledgement, flushed.
//! - `file_child churn DIR SEGMENT_SIZE SESSIONS [CAP]`: as `append`, and after each append also
//!   writes a short-lived session and deletes it, so segments are rotated, compacted and removed
//!   all the time; prints `S NEXT` for the long-lived sessions only. With CAP, a long-lived
//!   session stops growing at CAP events while the churn goes on (its batches still move with
//!   every compaction), so the live data stays bounded however long the test runs.
//! - `file_child hold DIR`: opens the journal as its writer, prints `locked`, and keeps it until
//!   its standard input closes.
//! - `file_child try DIR`: tries to open the journal as its writer; prints `opened` (exit 0) or
//!   `locked: MESSAGE` (exit 3).
//! - `file_child read DIR SEGMENT_SIZE SESSIONS`: opens the journal as its writer, reads every event of
//!   sessions 0..SESSIONS (checking each), appends one more to each, then opens it read-only and
//!   reads them again, then verifies it and reads each session back from the report; prints
//!   `read EVENTS events in SEGMENTS segments` (exit 0), or the first error (exit 1). For running
//!   under a small limit on open files.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore, OpenError};
use stepjournal_codec::{Stamped, UnixMillis};
use stepjournal_tests::file_fixture::{crash_event, crash_session};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let dir = PathBuf::from(arg(1));
    match arg(0).as_str() {
        "append" => {
            let segment: u64 = arg(2).parse().unwrap_or(1 << 20);
            let sessions: usize = arg(3).parse().unwrap_or(4);
            append(dir, segment, sessions.max(1), None)
        }
        "churn" => {
            let segment: u64 = arg(2).parse().unwrap_or(1 << 20);
            let sessions: usize = arg(3).parse().unwrap_or(4);
            append(dir, segment, sessions.max(1), Some(arg(4).parse().unwrap_or(u64::MAX)))
        }
        "hold" => {
            let store = FileStore::open(&dir, FileOptions::new()).unwrap();
            println!("locked");
            std::io::stdout().flush().unwrap();
            for _ in std::io::stdin().lock().lines() {}
            drop(store);
            ExitCode::SUCCESS
        }
        "read" => {
            match read(&dir, arg(2).parse().unwrap_or(1 << 20), arg(3).parse().unwrap_or(4)) {
                Ok(line) => {
                    println!("{line}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    println!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        "try" => match FileStore::open(&dir, FileOptions::new()) {
            Ok(_) => {
                println!("opened");
                ExitCode::SUCCESS
            }
            Err(e @ OpenError::Locked { .. }) => {
                println!("locked: {e}");
                ExitCode::from(3)
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        },
        other => {
            eprintln!("unknown mode `{other}`");
            ExitCode::from(2)
        }
    }
}

/// Reads and checks every session, appends to each, and reads them again read-only and through
/// verify.
fn read(dir: &std::path::Path, segment: u64, sessions: usize) -> Result<String, String> {
    let check = |s: usize, log: &[stepjournal_codec::Record]| -> Result<u64, String> {
        for (i, r) in log.iter().enumerate() {
            if r.seq.get() != i as u64 || r.event != crash_event(s, i as u64) {
                return Err(format!("session {s}: seq {i} holds {:?}", r.seq));
            }
        }
        Ok(log.len() as u64)
    };
    let options = FileOptions::new().segment_size(segment);
    let store = FileStore::open(dir, options).map_err(|e| e.to_string())?;
    let mut events = 0;
    for s in 0..sessions {
        let n = check(s, &store.read_all(&crash_session(s)).map_err(|e| e.to_string())?)?;
        let e = [Stamped::at(UnixMillis(n), crash_event(s, n))];
        store
            .append(&crash_session(s), stepjournal_codec::Seq(n), &e, Durability::Synced)
            .map_err(|e| e.to_string())?;
        events += n + 1;
    }
    let segments = store.index_size().segments;
    drop(store);
    let ro = FileStore::open_read_only(dir).map_err(|e| e.to_string())?;
    let mut again = 0;
    for s in 0..sessions {
        again += check(s, &ro.read_all(&crash_session(s)).map_err(|e| e.to_string())?)?;
    }
    drop(ro);
    let report = stepjournal_backends::file::verify_dir(dir, &Default::default(), &mut |_, _| {})
        .map_err(|e| e.to_string())?;
    if !report.is_clean() {
        return Err(format!("verify: {:?}", report.findings));
    }
    let mut verified = 0;
    for s in 0..sessions {
        let log = report.read_session(&crash_session(s)).map_err(|e| e.to_string())?;
        let records: Vec<_> = log.into_iter().map(|l| l.record).collect();
        verified += check(s, &records)?;
    }
    if again != events || verified != events {
        return Err(format!("{events} events, {again} read-only, {verified} verified"));
    }
    Ok(format!("read {events} events in {segments} segments"))
}

/// Appends forever; with `churn`, a short-lived session written and deleted after each append,
/// and the long-lived sessions capped at that many events.
fn append(dir: PathBuf, segment: u64, sessions: usize, churn: Option<u64>) -> ExitCode {
    let store = match FileStore::open(&dir, FileOptions::new().segment_size(segment)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").unwrap();
    out.flush().unwrap();
    let mut tails: Vec<u64> =
        (0..sessions).map(|s| store.tail(&crash_session(s)).unwrap().get()).collect();
    let mut i = 0u64;
    loop {
        let s = (i % sessions as u64) as usize;
        let n = 1 + i % 3;
        let from = tails[s];
        if churn.is_none_or(|cap| from < cap) {
            let events: Vec<Stamped> =
                (from..from + n).map(|q| Stamped::at(UnixMillis(q), crash_event(s, q))).collect();
            let ack = store
                .append(
                    &crash_session(s),
                    stepjournal_codec::Seq(from),
                    &events,
                    Durability::Synced,
                )
                .unwrap();
            tails[s] = ack.next.get();
            writeln!(out, "{s} {}", ack.next).unwrap();
            out.flush().unwrap();
        }
        if churn.is_some() {
            let temp = stepjournal_codec::SessionId::new(format!("temp-{i}").as_str()).unwrap();
            let e = [Stamped::at(UnixMillis(i), stepjournal_tests::sample::oversized(600))];
            store.append(&temp, stepjournal_codec::Seq(0), &e, Durability::Buffered).unwrap();
            store.delete(&temp).unwrap();
        }
        i += 1;
    }
}
