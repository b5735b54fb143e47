//! `runtime_child` processes as the tests of several actors drive them: started (with a skewed
//! wall clock, through libfaketime, when asked), read line by line, signalled, killed and reaped
//! when dropped; their reports parsed; the logs they leave checked.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use stepjournal_codec::{Entry, Event, Record, RunOutcome, SessionId};
use stepjournal_tests::watchdog::hung;

pub const CHILD: &str = env!("CARGO_BIN_EXE_runtime_child");

/// How long any one wait on a child may take before the test fails as hung (a watchdog, far
/// above a normal round; never a timing assertion).
pub const LIMIT: Duration = Duration::from_secs(60);

/// A `runtime_child` process, killed (SIGKILL, and thawed first if frozen) and reaped when
/// dropped, so that no path of a test leaves one behind.
pub struct Actor {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Actor {
    pub fn spawn(name: &str, args: &[&str]) -> Actor {
        let mut command = Command::new(CHILD);
        command.args(args);
        Actor::start(name, command)
    }

    /// Starts `command` (a `runtime_child`), its standard output read line by line.
    pub fn start(name: &str, mut command: Command) -> Actor {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: cannot start {CHILD}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Actor { name: name.to_owned(), child, stdin, lines }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32).unwrap()
    }

    pub fn signal(&self, signal: Signal) {
        kill_process(self.pid(), signal)
            .unwrap_or_else(|e| panic!("{}: sending {signal:?}: {e}", self.name));
    }

    /// The next line, which must start with `want`.
    pub fn expect(&mut self, want: &str) -> String {
        match self.lines.recv_timeout(LIMIT) {
            Ok(line) if line.starts_with(want) => line,
            Ok(line) => panic!("{}: said {line:?}, not {want:?}", self.name),
            Err(RecvTimeoutError::Timeout) => {
                panic!("{}", hung(&format!("{}: the line {want:?}", self.name), LIMIT))
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait();
                panic!("{}: exited ({status:?}) before saying {want:?}", self.name)
            }
        }
    }

    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Every line up to the end of its output, and its exit status.
    pub fn finish(&mut self) -> (Vec<String>, ExitStatus) {
        let started = Instant::now();
        let mut lines = Vec::new();
        loop {
            match self.lines.recv_timeout(LIMIT.saturating_sub(started.elapsed())) {
                Ok(line) => lines.push(line),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{}", hung(&format!("{}: its output", self.name), LIMIT))
                }
            }
        }
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (lines, status);
            }
            assert!(started.elapsed() < LIMIT, "{}", hung(&format!("{}: exit", self.name), LIMIT));
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// SIGKILL, reaped.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        assert!(!status.success(), "{}: killed, not finished: {status}", self.name);
    }
}

impl Drop for Actor {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = kill_process(self.pid(), Signal::CONT);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A runtime's report, as `runtime_child recover` prints it.
#[derive(Debug, Default)]
pub struct Report {
    pub lists: BTreeMap<String, Vec<String>>,
    pub ended: BTreeMap<String, String>,
}

impl Report {
    pub fn parse(who: &str, lines: &[String]) -> Report {
        let mut report = Report::default();
        for line in lines {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("ended") => {
                    let session = words.next().unwrap().to_owned();
                    report.ended.insert(session, words.collect::<Vec<_>>().join(" "));
                }
                Some("done") => {}
                Some(list @ ("recovered" | "changed" | "skipped" | "waiting" | "failed")) => {
                    report.lists.insert(list.to_owned(), words.map(str::to_owned).collect());
                }
                _ => panic!("{who}: unexpected line {line:?}"),
            }
        }
        assert_eq!(lines.last().map(String::as_str), Some("done"), "{who}: {lines:?}");
        report
    }

    pub fn list(&self, name: &str) -> &[String] {
        self.lists.get(name).map_or(&[], Vec::as_slice)
    }
}

pub fn session(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

pub fn events(log: &[Record]) -> Vec<Event> {
    log.iter().map(|r| r.event.clone()).collect()
}

pub fn is_wake(e: &Event) -> bool {
    matches!(e, Event::RunStarted(s) if s.entry == Entry::Wake)
}

/// A log as the test prints it in a violation's description.
pub fn excerpt(log: &[Record]) -> String {
    let lines: Vec<String> = log
        .iter()
        .map(|r| format!("  {} {}", r.seq, stepjournal_codec::json::event_to_json(&r.event)))
        .collect();
    lines.join("\n")
}

/// Fails with every violation, numbered, when there is any.
pub fn assert_none(loop_name: &str, violations: &[String]) {
    assert!(
        violations.is_empty(),
        "{loop_name}: {} violation(s):\n{}",
        violations.len(),
        violations.join("\n")
    );
}

/// Where another runtime took a session over from run `a_run` (a runtime since fenced): the
/// index of its wake (`run_started` with entry `wake`), of the end of its run (`completed`), and
/// every record of the fenced runtime that landed after that wake: a result of its body
/// (`{"by":"a"}`), its run's end, or anything after the other's run ended. `None` when the log
/// holds no wake.
pub struct Takeover<'a> {
    pub wake: usize,
    pub end: Option<usize>,
    pub late: Vec<&'a Record>,
}

pub fn takeover<'a>(log: &'a [Record], a_run: &str) -> Option<Takeover<'a>> {
    let wake = log.iter().position(|r| is_wake(&r.event))?;
    let end = log.iter().position(|r| {
        matches!(&r.event, Event::RunEnded(e) if e.run.as_str() != a_run
            && e.outcome == RunOutcome::Completed)
    });
    let late = log
        .iter()
        .enumerate()
        .skip(wake + 1)
        .filter(|(i, r)| {
            let after_end = end.is_some_and(|end| *i > end);
            let a_result = matches!(&r.event, Event::ToolResult(t)
                if t.output.get().contains(r#""by":"a""#));
            let a_end = matches!(&r.event, Event::RunEnded(e) if e.run.as_str() == a_run);
            after_end || a_result || a_end
        })
        .map(|(_, r)| r)
        .collect();
    Some(Takeover { wake, end, late })
}

/// libfaketime, preloaded into a child to skew its wall clock (Debian's `faketime` package;
/// its `faketime` wrapper would stand between the test and the child, which then outlives a
/// kill of the wrapper). Under `CI=true` its absence fails the test.
pub fn libfaketime() -> Option<&'static str> {
    let found = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/faketime/libfaketimeMT.so.1",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists());
    assert!(
        found.is_some() || std::env::var("CI").as_deref() != Ok("true"),
        "this test needs libfaketime, which CI installs (.ci/run: the faketime package)"
    );
    if found.is_none() {
        eprintln!("skipped: this test skews runtimes' clocks with libfaketime, not installed");
    }
    found
}

impl Actor {
    /// `runtime_child args` with its wall clock `offset` from this machine's (libfaketime
    /// preloaded; the monotonic clock left alone, so its timers run true).
    pub fn spawn_skewed(name: &str, lib: &str, offset: &str, args: &[&str]) -> Actor {
        let mut command = Command::new(CHILD);
        command
            .env("LD_PRELOAD", lib)
            .env("FAKETIME", offset)
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .args(args);
        Actor::start(name, command)
    }
}
