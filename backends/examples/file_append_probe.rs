//! A measurement harness for the file backend's append path, run by hand (it is no test and
//! asserts nothing about speed).
//!
//! - `file_append_probe rate DIR THREADS MILLIS synced|buffered`: THREADS threads, each appending
//!   one 256-byte event at a time to its own session of a fresh journal in DIR for MILLIS
//!   milliseconds; prints one line: threads, appends, appends/s, fdatasync calls per append,
//!   groups per append, and the p50 and p99 latency of an append in microseconds.
//! - `file_append_probe count DIR N`: N `Buffered` single-event appends to one session from one
//!   thread, and nothing else: for `valgrind --tool=callgrind`, whose instruction count divided
//!   by N is the cost of one append.
//!
//! - `file_append_probe fill DIR MB`: fills DIR (kept) with `Buffered` single-event appends from
//!   8 sessions until it holds MB megabytes; `file_append_probe open DIR`: opens it and prints
//!   how long the open took (the scan that rebuilds the index), in milliseconds.
//!
//! To compare two builds on a disk whose speed drifts, run them in short alternating turns.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Message, Role, Seq, SessionId, Stamped, UnixMillis};

fn event() -> Stamped {
    // About 256 bytes as a record: the 28-byte header, a 9-byte session id and the payload.
    let text = "x".repeat(214);
    Stamped::at(UnixMillis(1_700_000_000_000), Message { role: Role::User, text })
}

fn session(i: usize) -> SessionId {
    SessionId::new(format!("probe-{i:03}").as_str()).unwrap()
}

fn fresh(dir: &Path) -> Result<PathBuf, String> {
    let sub = dir.join(format!("probe-{}", std::process::id()));
    if sub.exists() {
        std::fs::remove_dir_all(&sub).map_err(|e| format!("{}: {e}", sub.display()))?;
    }
    Ok(sub)
}

fn rate(dir: &Path, threads: usize, millis: u64, durability: Durability) -> Result<(), String> {
    let sub = fresh(dir)?;
    let store = FileStore::open(&sub, FileOptions::new()).map_err(|e| e.to_string())?;
    let one = [event()];
    let barrier = Barrier::new(threads + 1);
    let budget = Duration::from_millis(millis);
    let before = store.stats();
    let (latencies, elapsed) = std::thread::scope(|scope| -> Result<_, String> {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (store, barrier, one) = (&store, &barrier, &one);
                scope.spawn(move || -> Result<Vec<u32>, String> {
                    let s = session(t);
                    let mut tail = Seq(0);
                    let mut lat = Vec::new();
                    barrier.wait();
                    let start = Instant::now();
                    while start.elapsed() < budget {
                        let t0 = Instant::now();
                        let ack =
                            store.append(&s, tail, one, durability).map_err(|e| e.to_string())?;
                        lat.push(t0.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                        tail = ack.next;
                    }
                    Ok(lat)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.join().map_err(|_| "an appender panicked".to_owned())??);
        }
        Ok((all, start.elapsed()))
    })?;
    let after = store.stats();
    drop(store);
    let _ = std::fs::remove_dir_all(&sub);
    let mut latencies = latencies;
    latencies.sort_unstable();
    let n = latencies.len().max(1);
    let pct = |p: usize| latencies.get((n - 1) * p / 100).copied().unwrap_or(0);
    let appends = after.appends - before.appends;
    let per = |x: u64| x as f64 / appends.max(1) as f64;
    println!(
        "threads {threads} appends {appends} per_sec {:.0} syncs_per_append {:.4} \
         groups_per_append {:.4} p50_us {} p99_us {}",
        appends as f64 / elapsed.as_secs_f64(),
        per(after.syncs - before.syncs),
        per(after.groups - before.groups),
        pct(50),
        pct(99),
    );
    Ok(())
}

fn count(dir: &Path, n: u64) -> Result<(), String> {
    let sub = fresh(dir)?;
    let store = FileStore::open(&sub, FileOptions::new()).map_err(|e| e.to_string())?;
    let one = [event()];
    let s = session(0);
    for q in 0..n {
        store.append(&s, Seq(q), &one, Durability::Buffered).map_err(|e| e.to_string())?;
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&sub);
    Ok(())
}

fn fill(dir: &Path, mb: u64) -> Result<(), String> {
    let store = FileStore::open(dir, FileOptions::new()).map_err(|e| e.to_string())?;
    let one = [event()];
    let mut tails = [Seq(0); 8];
    let mut i = 0usize;
    while store.stats().bytes < mb << 20 {
        let k = i % tails.len();
        let ack = store
            .append(&session(k), tails[k], &one, Durability::Buffered)
            .map_err(|e| e.to_string())?;
        tails[k] = ack.next;
        i += 1;
    }
    Ok(())
}

fn open(dir: &Path) -> Result<(), String> {
    let start = Instant::now();
    let store = FileStore::open(dir, FileOptions::new()).map_err(|e| e.to_string())?;
    let took = start.elapsed();
    let size = store.index_size();
    println!(
        "open_ms {:.1} sessions {} batches {} segments {}",
        took.as_secs_f64() * 1e3,
        size.sessions,
        size.batches,
        size.segments
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or_default();
    let dir = PathBuf::from(arg(1));
    let result = match arg(0) {
        "rate" => {
            let durability = match arg(4) {
                "buffered" => Durability::Buffered,
                _ => Durability::Synced,
            };
            let threads = arg(2).parse().unwrap_or(1usize).max(1);
            rate(&dir, threads, arg(3).parse().unwrap_or(1000), durability)
        }
        "count" => count(&dir, arg(2).parse().unwrap_or(100_000)),
        "fill" => fill(&dir, arg(2).parse().unwrap_or(256)),
        "open" => open(&dir),
        _ => Err("usage: file_append_probe rate DIR THREADS MILLIS synced|buffered \
                  | count DIR N | fill DIR MB | open DIR"
            .to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("file_append_probe: {e}");
            ExitCode::FAILURE
        }
    }
}
