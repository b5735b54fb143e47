//! Hang watchdogs for tests that wait on another process, a server or a thread: a test that
//! would otherwise hang fails instead, saying what did not finish. A limit here is far above
//! any normal run and is never a timing assertion: no test checks how fast something went.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// The failure message of a hang watchdog.
pub fn hung(what: &str, limit: Duration) -> String {
    format!(
        "hung: {what} did not finish within {} s (a hang watchdog, not a timing assertion)",
        limit.as_secs()
    )
}

/// Ends the test process, failing the test, if it is not dropped within `limit` of its start:
/// for a call that cannot be given a deadline of its own (a store call waiting on a server).
/// Under nextest each test is its own process, so only the hung test fails.
#[derive(Debug)]
pub struct Watchdog {
    done: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Watches `what` for `limit`.
    pub fn start(what: &str, limit: Duration) -> Watchdog {
        let (done, finished) = mpsc::channel::<()>();
        let message = hung(what, limit);
        let thread = std::thread::spawn(move || {
            if let Err(RecvTimeoutError::Timeout) = finished.recv_timeout(limit) {
                eprintln!("{message}");
                std::process::exit(101);
            }
        });
        Watchdog { done: Some(done), thread: Some(thread) }
    }
}

impl Drop for Watchdog {
    /// What it watched finished: the watchdog stands down.
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hang_says_what_did_not_finish_and_that_it_is_no_timing_assertion() {
        assert_eq!(
            hung("the append", Duration::from_secs(30)),
            "hung: the append did not finish within 30 s (a hang watchdog, not a timing assertion)"
        );
    }

    #[test]
    fn a_watchdog_dropped_before_its_limit_stands_down() {
        // Were it still watching, the drop would wait out the limit and end the process.
        let watchdog = Watchdog::start("nothing", Duration::from_secs(600));
        drop(watchdog);
    }
}

/// Sets its flag when a panic unwinds it (a normal drop leaves the flag alone): the threads that
/// watch the flag end, and a test whose thread failed fails instead of hanging on the others.
#[derive(Debug)]
pub struct StopOnPanic<'a>(pub &'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}
