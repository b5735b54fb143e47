//! A child process for the SQLite crash and race tests. It appends to a database file and prints
//! one line per acknowledged append, flushed before the next append starts:
//!
//! - `sqlite_child append-loop DB SESSION`: batches of 1 to 3 `numbered` events at the tail,
//!   alternating `Synced` and `Buffered`, forever; prints `acked FIRST NEXT`.
//! - `sqlite_child async-loop DB SESSIONS`: rounds of one `append_async` per session
//!   `SESSION-0` .. `SESSION-(N-1)`, all in flight together (the store's committer groups
//!   them), each a batch of 1 to 3 `numbered` events at the session's tail, alternating
//!   `Synced` and `Buffered` by round; waits for each and prints `acked I FIRST NEXT` (I the
//!   session's number), forever.
//! - `sqlite_child race DB SESSION ROUNDS TAG`: one `numbered(TAG)` event at a time at the tail
//!   it last read, until the tail reaches ROUNDS; prints `won SEQ` for each append that landed.
//!   It starts once a line arrives on its standard input, so that racers start together.

#[cfg(feature = "sqlite")]
fn main() -> std::process::ExitCode {
    use std::io::Write;

    use stepjournal_backends::sqlite::{SqliteOptions, SqliteStore};
    use stepjournal_backends::{AppendError, Durability, JournalStore};
    use stepjournal_codec::{SessionId, Stamped, UnixMillis};
    use stepjournal_tests::sample::{numbered, stamped_numbered};

    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: sqlite_child append-loop DB SESSION | async-loop DB SESSIONS \
                 | race DB SESSION ROUNDS TAG";
    let (Some(mode), Some(db), Some(session)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("{usage}");
        return std::process::ExitCode::from(2);
    };
    let store = match SqliteStore::open(db, SqliteOptions::default()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot open {db}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    if mode == "async-loop" {
        let sessions: Vec<SessionId> = match session.parse::<usize>() {
            Ok(n) => (0..n).map(|i| SessionId::new(format!("async-{i}")).unwrap()).collect(),
            Err(_) => {
                eprintln!("{usage}");
                return std::process::ExitCode::from(2);
            }
        };
        let result: Result<(), String> = (|| {
            let mut tails = Vec::new();
            for s in &sessions {
                tails.push(store.tail(s).map_err(|e| e.to_string())?);
            }
            for round in 0u64.. {
                let durability =
                    if round % 2 == 0 { Durability::Synced } else { Durability::Buffered };
                let futures: Vec<_> = sessions
                    .iter()
                    .zip(&tails)
                    .enumerate()
                    .map(|(i, (s, tail))| {
                        let n = 1 + (round + i as u64) % 3;
                        let batch = stamped_numbered(tail.get(), n);
                        store.append_async(s, *tail, &batch, durability)
                    })
                    .collect();
                for (i, future) in futures.into_iter().enumerate() {
                    let ack = future.wait().map_err(|e| format!("async append: {e}"))?;
                    writeln!(out, "acked {i} {} {}", ack.first, ack.next)
                        .map_err(|e| e.to_string())?;
                    tails[i] = ack.next;
                }
                out.flush().map_err(|e| e.to_string())?;
            }
            Ok(())
        })();
        return match result {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sqlite_child: {e}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    let session = SessionId::new(session.as_str()).unwrap();
    let result: Result<(), String> = match mode.as_str() {
        "append-loop" => (|| {
            let mut next = store.tail(&session).map_err(|e| e.to_string())?;
            for round in 0u64.. {
                let n = 1 + round % 3;
                let durability =
                    if round % 2 == 0 { Durability::Synced } else { Durability::Buffered };
                let batch = stamped_numbered(next.get(), n);
                let ack = store
                    .append(&session, next, &batch, durability)
                    .map_err(|e| format!("append at {next}: {e}"))?;
                writeln!(out, "acked {} {}", ack.first, ack.next).map_err(|e| e.to_string())?;
                out.flush().map_err(|e| e.to_string())?;
                next = ack.next;
            }
            Ok(())
        })(),
        "race" => (|| {
            let rounds: u64 = args.get(4).and_then(|r| r.parse().ok()).ok_or(usage)?;
            let tag: u64 = args.get(5).and_then(|t| t.parse().ok()).ok_or(usage)?;
            let mut go = String::new();
            std::io::stdin().read_line(&mut go).map_err(|e| e.to_string())?;
            loop {
                let tail = store.tail(&session).map_err(|e| e.to_string())?;
                if tail.get() >= rounds {
                    return Ok(());
                }
                let e = Stamped::at(UnixMillis(tag), numbered(tag));
                match store.append(&session, tail, &[e], Durability::Synced) {
                    Ok(ack) => {
                        writeln!(out, "won {}", ack.first).map_err(|e| e.to_string())?;
                        out.flush().map_err(|e| e.to_string())?;
                    }
                    Err(AppendError::Conflict { actual, .. }) if actual > tail => {}
                    Err(e) => return Err(format!("append at {tail}: {e}")),
                }
            }
        })(),
        _ => Err(usage.to_owned()),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sqlite_child: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(not(feature = "sqlite"))]
fn main() -> std::process::ExitCode {
    eprintln!("sqlite_child needs the `sqlite` feature");
    std::process::ExitCode::from(2)
}
