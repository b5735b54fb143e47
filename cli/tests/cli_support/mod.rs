//! Helpers shared by the command's test files: fixture journals on every backend in the build,
//! written through the store API with fixed append times, and the binary.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use stepjournal_backends::{Durability, JournalStore, OpenOptions, open_url};
use stepjournal_codec::{
    AttemptStarted, Call, CallId, CallKind, CheckpointId, DispatchMinted, Entry, Event, Message,
    OutputChunk, PairReason, Paired, RawJson, Replay, ReplyCommitted, Rewound, Role, RunEnded,
    RunId, RunOutcome, RunStarted, Seq, SessionId, Stamped, StepCommit, StepNo, Suspended,
    ToolName, ToolResult, UnixMillis,
};

/// 2025-01-15T09:00:00Z.
pub const T0: u64 = 1_736_931_600_000;

/// Runs the binary with `args`, with no operator in its environment (`--as` defaults to
/// `$STEPJOURNAL_OPERATOR`, `$USER` or `$LOGNAME`: what a write command records must not
/// depend on who runs the tests).
pub fn bin(args: &[&str]) -> Output {
    bin_env(args, &[])
}

/// Runs the binary with `args` and, of the operator variables, only `vars` set.
pub fn bin_env(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stepjournal"));
    for var in ["STEPJOURNAL_OPERATOR", "USER", "LOGNAME"] {
        command.env_remove(var);
    }
    command.envs(vars.iter().copied()).args(args).output().expect("the binary runs")
}

/// Runs the binary and returns its stdout, asserting it exited with `code`.
pub fn bin_ok(args: &[&str], code: i32) -> String {
    let out = bin(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{args:?}: stdout {}\nstderr {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn call(id: &str, tool: &str, replay: Replay, kind: CallKind) -> Call {
    Call {
        call: CallId::from(id),
        tool: ToolName::from(tool),
        args: RawJson::parse(match tool {
            "charge_card" => r#"{"cents":4200,"card":"visa-1234"}"#,
            "set_preference" => r#"{"key":"cuisine","value":"thai"}"#,
            "search_restaurants" => r#"{"near":"home","party":2}"#,
            "ask_user" => r#"{"question":"Which day?"}"#,
            "send_email" => r#"{"to":"group@example.com"}"#,
            _ => "{}",
        })
        .unwrap(),
        kind,
        replay,
        group: None,
        sequential: false,
    }
}

pub fn run_started(run: &str, entry: Entry) -> Event {
    RunStarted { run: RunId::from(run), entry, by: None }.into()
}

pub fn message(text: &str) -> Event {
    Message { role: Role::User, text: text.to_owned() }.into()
}

pub fn reply(step: u64, cp: &str, text: &str, calls: Vec<Call>) -> Event {
    ReplyCommitted {
        step: StepNo(step),
        checkpoint: CheckpointId::from(cp),
        text: text.to_owned(),
        calls,
        metadata: None,
    }
    .into()
}

pub fn dispatch(call: &str, d: &str) -> Event {
    DispatchMinted { call: CallId::from(call), dispatch: d.into() }.into()
}

pub fn attempt(call: &str, n: u32) -> Event {
    AttemptStarted { call: CallId::from(call), attempt: n.into() }.into()
}

pub fn chunk(call: &str, n: u32, text: &str) -> Event {
    OutputChunk { call: CallId::from(call), attempt: n.into(), text: text.to_owned() }.into()
}

pub fn result(call: &str, n: u32, output: &str) -> Event {
    ToolResult {
        call: CallId::from(call),
        attempt: n.into(),
        output: RawJson::parse(output).unwrap(),
        is_error: false,
        metadata: None,
    }
    .into()
}

pub fn paired(call: &str, reason: PairReason, partial: &str) -> Event {
    Paired {
        call: CallId::from(call),
        reason,
        message: reason.model_message().to_owned(),
        partial: partial.to_owned(),
        rule: None,
    }
    .into()
}

pub fn commit(step: u64, cp: &str) -> Event {
    StepCommit { step: StepNo(step), checkpoint: CheckpointId::from(cp) }.into()
}

pub fn ended(run: &str, outcome: RunOutcome) -> Event {
    RunEnded { run: RunId::from(run), outcome, error: None, by: None }.into()
}

/// A session's events in the batches a writer appends them in.
pub type Batches = Vec<Vec<Event>>;

/// A finished session: one step, run to its end.
pub fn finished() -> Batches {
    vec![
        vec![
            run_started("run-1", Entry::NewTurn { message: "find a table".into() }),
            message("find a table for two tonight"),
        ],
        vec![
            reply(
                1,
                "cp-1",
                "Let me look.",
                vec![call("c1", "search_restaurants", Replay::Safe, CallKind::Tool)],
            ),
            dispatch("c1", "d-1"),
        ],
        vec![attempt("c1", 1)],
        vec![chunk("c1", 1, "searching ")],
        vec![chunk("c1", 1, "3 places found")],
        vec![result("c1", 1, r#"{"places":["Lotus","Basil","Siam"]}"#)],
        vec![commit(1, "cp-2"), ended("run-1", RunOutcome::Completed)],
    ]
}

/// A session stuck mid-step: an unsafe and a safe call started, the process gone.
pub fn stuck() -> Batches {
    vec![
        vec![
            run_started("run-1", Entry::NewTurn { message: "book it".into() }),
            message("book Lotus and remember I like thai"),
        ],
        vec![
            reply(
                1,
                "cp-1",
                "Booking now.",
                vec![
                    call("c1", "charge_card", Replay::Unsafe, CallKind::Tool),
                    call("c2", "set_preference", Replay::Safe, CallKind::Tool),
                ],
            ),
            dispatch("c1", "d-1"),
            dispatch("c2", "d-2"),
        ],
        vec![attempt("c1", 1)],
        vec![attempt("c2", 1)],
        vec![chunk("c1", 1, "charging 42.00 EUR")],
    ]
}

/// A session suspended, waiting for the client.
pub fn suspended() -> Batches {
    vec![
        vec![
            run_started("run-1", Entry::NewTurn { message: "which day?".into() }),
            message("book me a table"),
        ],
        vec![
            reply(
                1,
                "cp-1",
                "Which day?",
                vec![call("c1", "ask_user", Replay::Unsafe, CallKind::Client)],
            ),
            dispatch("c1", "d-1"),
        ],
        vec![
            Suspended { calls: vec![CallId::from("c1")] }.into(),
            ended("run-1", RunOutcome::Suspended),
        ],
    ]
}

/// A session stopped mid-step.
pub fn stopped() -> Batches {
    vec![
        vec![
            run_started("run-1", Entry::NewTurn { message: "mail".into() }),
            message("email the group"),
        ],
        vec![
            reply(1, "cp-1", "", vec![call("c1", "send_email", Replay::Unsafe, CallKind::Tool)]),
            dispatch("c1", "d-1"),
        ],
        vec![attempt("c1", 1)],
        vec![
            paired("c1", PairReason::RunStopped, ""),
            commit(1, "cp-commit-1"),
            ended("run-1", RunOutcome::Stopped),
        ],
    ]
}

/// A session whose run failed, then was retried to completion: the failed run's pairing and
/// end are voided by the retry's `rewound`.
pub fn retried() -> Batches {
    vec![
        vec![
            run_started("run-1", Entry::NewTurn { message: "prefs".into() }),
            message("remember I like thai"),
        ],
        vec![
            reply(1, "cp-1", "", vec![call("c1", "set_preference", Replay::Safe, CallKind::Tool)]),
            dispatch("c1", "d-1"),
        ],
        vec![attempt("c1", 1)],
        vec![paired("c1", PairReason::OutcomeUnknown, ""), ended("run-1", RunOutcome::Failed)],
        vec![
            run_started("run-2", Entry::Retry { checkpoint: None, message: None }),
            Rewound { to: CheckpointId::from("cp-1") }.into(),
        ],
        vec![attempt("c1", 2)],
        vec![result("c1", 2, r#"{"saved":true}"#)],
        vec![commit(1, "cp-2"), ended("run-2", RunOutcome::Completed)],
    ]
}

/// A session whose last run failed (a `retry` is allowed).
pub fn failed() -> Batches {
    let mut b = retried();
    b.truncate(4);
    b
}

/// The fixture sessions, by id.
pub fn fixture() -> Vec<(&'static str, Batches)> {
    vec![
        ("failed", failed()),
        ("finished", finished()),
        ("retried", retried()),
        ("stopped", stopped()),
        ("stuck", stuck()),
        ("suspended", suspended()),
    ]
}

/// Appends a session's batches; event `i` of the session is stamped `base + i` seconds.
/// The events of `session` in `store`, in order.
pub fn events(store: &dyn JournalStore, session: &str) -> Vec<Event> {
    let session = SessionId::from_stored(session);
    store.read_all(&session).unwrap().into_iter().map(|r| r.event).collect()
}

pub fn append_session(store: &dyn JournalStore, session: &str, batches: &Batches, base: u64) {
    let s = SessionId::new(session).unwrap();
    let mut seq = store.tail(&s).unwrap().get();
    for batch in batches {
        let stamped: Vec<Stamped> = batch
            .iter()
            .enumerate()
            .map(|(i, e)| Stamped::at(UnixMillis(base + (seq + i as u64) * 1000), e.clone()))
            .collect();
        store.append(&s, Seq(seq), &stamped, Durability::Synced).unwrap();
        seq += batch.len() as u64;
    }
}

/// Writes a file journal in `dir` holding `sessions` byte by byte, one group per batch, all of it
/// durable: for session ids a writer refuses (the session-id rule), as a journal written before
/// the rule may hold them. Event `i` of a session is stamped `base + i` seconds.
pub fn write_file_journal_unchecked(dir: &Path, sessions: &[(String, Batches)], base: u64) {
    use stepjournal_backends::file::layout::{
        GROUP_HEADER_LEN, GroupHeader, SegmentId, encode_segment_header,
    };
    use stepjournal_codec::{Limits, Record, batch};
    std::fs::create_dir_all(dir).unwrap();
    let mut bytes = encode_segment_header(SegmentId(1)).to_vec();
    for (session, batches) in sessions {
        let s = SessionId::from_stored(session.as_str());
        let mut seq = 0u64;
        for events in batches {
            let records: Vec<Record> = events
                .iter()
                .enumerate()
                .map(|(i, e)| Record {
                    session: s.clone(),
                    seq: Seq(seq + i as u64),
                    at: UnixMillis(base + (seq + i as u64) * 1000),
                    event: e.clone(),
                })
                .collect();
            seq += events.len() as u64;
            let mut frame = Vec::new();
            batch::encode_records_into(&mut frame, &records, &Limits::default()).unwrap();
            let synced = bytes.len() as u64;
            let mut group = vec![0u8; GROUP_HEADER_LEN];
            GroupHeader { len: frame.len() as u32, frames: 1, synced }.encode_into(&mut group);
            group.extend_from_slice(&frame);
            bytes.extend_from_slice(&group);
        }
    }
    std::fs::write(dir.join(SegmentId(1).file_name()), bytes).unwrap();
}

/// Writes every fixture session into `store`; session `k` (in id order) starts at `T0 + k`
/// minutes.
pub fn populate(store: &dyn JournalStore) {
    for (k, (name, batches)) in fixture().iter().enumerate() {
        append_session(store, name, batches, T0 + k as u64 * 60_000);
    }
}

/// A backend's store in a fresh place, removed when dropped.
pub struct Place {
    pub name: &'static str,
    pub url: String,
    pub dir: Option<tempfile::TempDir>,
    /// A PostgreSQL place's schema, dropped with the place.
    pub schema: Option<String>,
}

impl Place {
    /// Opens the store for writing (creating it).
    pub fn open(&self) -> Arc<dyn JournalStore> {
        open_url(&self.url, OpenOptions::create()).unwrap()
    }

    /// The journal directory of a file store.
    pub fn path(&self) -> PathBuf {
        let url = &self.url;
        PathBuf::from(url.strip_prefix("file:").or_else(|| url.strip_prefix("sqlite:")).unwrap())
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(schema) = self.schema.take() {
            let options = stepjournal_backends::postgres::PostgresOptions::default();
            if let Ok(store) =
                stepjournal_backends::postgres::PostgresStore::connect(&self.url, options)
                && let Err(e) = store.drop_schema()
            {
                eprintln!("could not drop test schema {schema}: {e}");
            }
        }
    }
}

pub fn file_place() -> Place {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file:{}", dir.path().join("journal").display());
    Place { name: "file", url, dir: Some(dir), schema: None }
}

pub fn sqlite_place() -> Place {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("journal.db").display());
    Place { name: "sqlite", url, dir: Some(dir), schema: None }
}

/// Whether PostgreSQL tests run: `STEPJOURNAL_PG_URL` names a server.
pub fn pg_enabled() -> bool {
    cfg!(stepjournal_pg)
}

pub fn pg_place() -> Place {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let base = std::env::var("STEPJOURNAL_PG_URL").expect("STEPJOURNAL_PG_URL names the server");
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let schema =
        format!("sjcli_{}_{}_{nanos}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let sep = if base.contains('?') { '&' } else { '?' };
    Place {
        name: "postgres",
        url: format!("{base}{sep}schema={schema}"),
        dir: None,
        schema: Some(schema),
    }
}

/// A fresh place on every backend of this build (PostgreSQL when `STEPJOURNAL_PG_URL` is set).
pub fn places() -> Vec<Place> {
    let mut v = vec![file_place()];
    v.push(sqlite_place());
    if pg_enabled() {
        v.push(pg_place());
    }
    v
}

/// Every backend's place, populated with the fixture sessions.
pub fn populated() -> Vec<Place> {
    let places = places();
    for p in &places {
        let store = p.open();
        populate(&*store);
    }
    places
}

/// A golden file under `tests/fixtures/cli/`; with `STEPJOURNAL_BLESS=1` it is (re)written.
pub fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cli").join(name);
    if std::env::var_os("STEPJOURNAL_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (STEPJOURNAL_BLESS=1 writes it)", path.display()));
    assert_eq!(actual, expected, "{name} differs from its golden file");
}

/// A `sessions` table with its AGE column (the time since each last append, which moves with
/// the clock) written as `<AGE>`, whatever its width.
pub fn mask_ages(table: &str) -> String {
    let Some(header) = table.lines().next() else { return String::new() };
    let start = header.find("LAST APPEND (UTC)").unwrap() + 24 + 2;
    let end = header.find(" AGE").unwrap() + 4;
    table
        .lines()
        .map(|l| {
            let chars: Vec<char> = l.chars().collect();
            let head: String = chars[..start].iter().collect();
            let tail: String = chars[end.min(chars.len())..].iter().collect();
            format!("{head}<AGE>{tail}\n")
        })
        .collect()
}

/// A `calls` table with its last column (AGE) cut off each line.
pub fn mask_call_ages(table: &str) -> String {
    table
        .lines()
        .map(|l| {
            let kept = l.trim_end().rsplit_once(' ').map_or(l, |(a, _)| a).trim_end();
            format!("{kept}\n")
        })
        .collect()
}
