//! Measures the SQLite backend's group commit: `sqlite_groups DIR THREADS MILLIS [buffered]`
//! runs THREADS appenders (one session each, one 256-byte event per `Synced` append, or
//! `Buffered` when asked) for MILLIS ms on a fresh database under DIR, and prints one line:
//! threads, appends, appends/s, commits per append, mean group, mean commit time. A tool for
//! comparing group-commit designs by hand, run in alternating turns; no test reads its output.

#[cfg(feature = "sqlite")]
fn main() -> std::process::ExitCode {
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};
    use stepjournal_backends::{Durability, JournalStore};
    use stepjournal_codec::{Message, Role, Seq, SessionId, Stamped, UnixMillis};

    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(threads), Some(millis)) = (
        args.get(1),
        args.get(2).and_then(|t| t.parse::<usize>().ok()),
        args.get(3).and_then(|m| m.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: sqlite_groups DIR THREADS MILLIS [buffered]");
        return std::process::ExitCode::from(2);
    };
    let durability = if args.get(4).is_some_and(|a| a == "buffered") {
        Durability::Buffered
    } else {
        Durability::Synced
    };
    let path = std::path::Path::new(dir).join(format!("groups-{}.sqlite", std::process::id()));
    let store = match SqliteStore::open(&path, SqliteOptions::default()) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("sqlite_groups: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let text = "x".repeat(200);
    let stop = AtomicBool::new(false);
    let start = Barrier::new(threads + 1);
    let (appends, elapsed) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (store, stop, start, text) = (&store, &stop, &start, &text);
                scope.spawn(move || {
                    let s = SessionId::new(format!("s{t}"))
                        .unwrap_or_else(|_| SessionId::from_stored("s"));
                    let event = [Stamped::at(
                        UnixMillis(1),
                        Message { role: Role::User, text: text.clone() },
                    )];
                    start.wait();
                    let mut next = Seq(0);
                    while !stop.load(Ordering::Relaxed) {
                        match store.append(&s, next, &event, durability) {
                            Ok(ack) => next = ack.next,
                            Err(e) => {
                                eprintln!("sqlite_groups: {e}");
                                break;
                            }
                        }
                    }
                    next.get()
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        std::thread::sleep(Duration::from_millis(millis));
        stop.store(true, Ordering::Relaxed);
        let appends: u64 = workers.into_iter().map(|w| w.join().unwrap_or(0)).sum();
        (appends, began.elapsed())
    });
    let m = store.metrics();
    drop(store);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    println!(
        "threads {threads} appends {appends} appends/s {:.0} commits/append {:.3} group {:.2} commit_us {:.0}",
        appends as f64 / elapsed.as_secs_f64(),
        per(m.groups, m.appends),
        per(m.appends, m.groups),
        per(m.sync_micros, m.syncs),
    );
    std::process::ExitCode::SUCCESS
}

#[cfg(not(feature = "sqlite"))]
fn main() -> std::process::ExitCode {
    eprintln!("sqlite_groups needs the `sqlite` feature");
    std::process::ExitCode::from(2)
}
