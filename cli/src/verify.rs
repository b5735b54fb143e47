//! `stepjournal verify`: records, checksums, sequence continuity and the protocol, every problem
//! with where it is.
//!
//! A file journal is checked on its bytes ([`stepjournal_backends::file::verify_dir`]): every
//! segment to its end, without the writer's lock and without writing. Other stores are read
//! session by session; a damaged row is pinned down by reading the session one event at a time.
//! Then each session's events are checked against the protocol ([`stepjournal_recovery::verify`]).

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{Value, json};
use stepjournal_backends::file::{FileFinding, verify_dir};
use stepjournal_backends::{JournalStore, StoreError, StoreUrl};
use stepjournal_codec::{Limits, Record, Seq, SessionId};

use super::progress::Progress;
use super::shown::{Shown, StoreName};
use super::store::{list_sessions, open_read};
use super::{CliError, Terminal};

/// Arguments of `stepjournal verify`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal verify file:./stepjournal-demo\n  \
stepjournal verify sqlite:journal.db SESSION\n  \
stepjournal verify file:./stepjournal-demo --json\n\n\
Checks every record's checksum and framing, that each session's sequence numbers run from 0 \
without gaps, and the protocol: a dispatch minted once per call, attempts dense from 1, results \
and pairings only for calls of a reply, nothing resolved twice unless a `rewound` voided the \
first, steps committed in order. Each problem is printed with its session, seq and (file \
journals) segment file and byte offset.\n\n\
A file journal is read without the writer's lock and never written: safe while a runtime \
writes it. Bytes a crash left half-written at the newest segment's end (a torn tail, never \
acknowledged) are noted but are not a problem.\n\n\
Exit status: 0 clean, 1 problems found, 2 the check could not run.")]
pub struct VerifyArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// Check only this session (a file journal's bytes are all checked still).
    #[arg(value_name = "SESSION")]
    pub session: Option<String>,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// One problem: where (as much of it as is known), and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The session, where known.
    pub session: Option<SessionId>,
    /// The event's sequence number, where known.
    pub seq: Option<Seq>,
    /// The segment file (file journals).
    pub segment: Option<PathBuf>,
    /// The byte offset in the segment.
    pub offset: Option<u64>,
    /// Bytes the damaged unit spans, where known.
    pub len: Option<u64>,
    /// What is wrong.
    pub what: String,
    /// Bytes a crash left half-written and never acknowledged: noted, not a problem.
    pub torn_tail: bool,
}

impl Finding {
    fn in_session(session: &SessionId, seq: Option<Seq>, what: String) -> Self {
        Finding {
            session: Some(session.clone()),
            seq,
            segment: None,
            offset: None,
            len: None,
            what,
            torn_tail: false,
        }
    }

    fn from_file(f: &FileFinding) -> Self {
        let mut what = f.problem.to_string();
        if f.torn_tail {
            what.push_str(
                " (a torn tail: never made durable; cut when the journal is next opened for writing)",
            );
            if let Some(t) = &f.torn {
                what.push_str(&format!(": {t}"));
            }
        } else if let Some(at) = f.valid_after {
            what.push_str(&format!(" (valid data follows at byte {at})"));
        }
        Finding {
            session: f.session.clone(),
            seq: f.seq,
            segment: Some(f.segment.clone()),
            offset: Some(f.offset),
            len: f.len,
            what,
            torn_tail: f.torn_tail,
        }
    }

    /// The finding as one JSON object.
    pub fn to_json(&self) -> Value {
        json!({
            "session": self.session.as_ref().map(SessionId::as_str),
            "seq": self.seq.map(Seq::get),
            "segment": self.segment.as_ref().map(|p| p.display().to_string()),
            "offset": self.offset,
            "len": self.len,
            "problem": self.what,
            "torn_tail": self.torn_tail,
        })
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut place = Vec::new();
        if let (Some(seg), Some(off)) = (&self.segment, self.offset) {
            let len = self.len.map_or(String::new(), |n| format!(" ({n} bytes)"));
            place.push(format!("segment {} at byte {off}{len}", seg.display()));
        }
        match (&self.session, self.seq) {
            (Some(s), Some(q)) => place.push(format!("session {s} seq {q}")),
            (Some(s), None) => place.push(format!("session {s}")),
            _ => {}
        }
        write!(f, "{}: {}", place.join(", "), self.what)
    }
}

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Everything found, torn tails included.
    pub findings: Vec<Finding>,
    /// Sessions checked.
    pub sessions: u64,
    /// Events read intact.
    pub events: u64,
    /// What was read (segments and bytes, for a file journal).
    pub scanned: String,
    /// Limits of the check (events past a gap are not checked against the protocol; what a
    /// live writer kept moving while it was read): said, never counted as problems.
    pub notes: Vec<String>,
}

impl Report {
    /// How many findings are problems (torn tails are not).
    pub fn problems(&self) -> usize {
        self.findings.iter().filter(|f| !f.torn_tail).count()
    }
}

/// Checks each session's records (dense, from where its log starts: seq 0, or a trimmed log's
/// kept snapshot) against the protocol; `place` gives a seq's file and offset.
fn protocol(
    session: &SessionId,
    records: &[Record],
    place: impl Fn(Seq) -> Option<(PathBuf, u64)>,
    report: &mut Report,
) {
    for found in stepjournal_recovery::verify_log(records) {
        let mut f = Finding::in_session(session, Some(found.seq), found.problem.to_string());
        if let Some((segment, offset)) = place(found.seq) {
            f.segment = Some(segment);
            f.offset = Some(offset);
        }
        report.findings.push(f);
    }
}

/// Checks a file journal's directory (see the [module documentation](self)).
pub fn verify_file(
    dir: &Path,
    url: &str,
    session: Option<&SessionId>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Report, CliError> {
    if !dir.is_dir() {
        return Err(CliError::Usage {
            option: "STORE",
            reason: format!(
                "no journal directory at {} (from {})",
                dir.display(),
                StoreName::of(url)
            ),
        });
    }
    let file = verify_dir(dir, &Limits::default(), progress).map_err(|source| CliError::Store {
        url: StoreName::of(url),
        doing: "checking the journal".to_owned(),
        source,
    })?;
    let mut report = Report {
        scanned: format!(
            "{} segment{}, {} bytes",
            file.segments.len(),
            if file.segments.len() == 1 { "" } else { "s" },
            file.bytes
        ),
        ..Report::default()
    };
    let wanted = |s: &Option<SessionId>| match (session, s) {
        (Some(want), Some(s)) => want == s,
        _ => true,
    };
    report
        .findings
        .extend(file.findings.iter().filter(|f| wanted(&f.session)).map(Finding::from_file));
    // What could not be checked beside a live writer: said, not counted as a problem.
    report.notes.extend(file.unchecked.iter().cloned());
    let sessions: Vec<SessionId> = match session {
        Some(s) => {
            let named = file.findings.iter().any(|f| f.session.as_ref() == Some(s));
            if file.session_events(s) == (0, 0) && !named {
                return Err(CliError::NoSession { url: StoreName::of(url), session: s.clone() });
            }
            vec![s.clone()]
        }
        None => {
            // A session whose every batch is damaged is known from its findings only.
            let mut all: Vec<SessionId> = file.sessions().collect();
            all.extend(file.findings.iter().filter_map(|f| f.session.clone()));
            all.sort();
            all.dedup();
            all
        }
    };
    for s in &sessions {
        let (readable, after_gap) = file.session_events(s);
        report.sessions += 1;
        report.events += readable + after_gap;
        let located = match file.read_session(s) {
            Ok(l) => l,
            // Beside a live writer: its batches kept moving under the read. Not damage.
            Err(StoreError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::Interrupted =>
            {
                report
                    .notes
                    .push(format!("session {s}: not read back for the protocol check: {source}"));
                continue;
            }
            Err(e) => {
                report.findings.push(Finding::in_session(
                    s,
                    None,
                    format!("cannot be read back: {e}"),
                ));
                continue;
            }
        };
        let records: Vec<Record> = located.iter().map(|l| l.record.clone()).collect();
        let first = records.first().map_or(0, |r| r.seq.get());
        let place = |seq: Seq| {
            let at = usize::try_from(seq.get().checked_sub(first)?).ok()?;
            located.get(at).map(|l| (l.segment.clone(), l.offset))
        };
        protocol(s, &records, place, &mut report);
        if after_gap > 0 {
            report.notes.push(format!(
                "session {s}: the protocol is checked up to seq {readable}; {after_gap} events \
                 after its first gap are not"
            ));
        }
    }
    Ok(report)
}

fn damaged(e: &StoreError) -> Option<String> {
    match e {
        StoreError::Corrupt { source, .. } => {
            Some(format!("the stored record is damaged: {source}"))
        }
        _ => None,
    }
}

/// Checks a store through its reads: every session (or one), each event's record, the
/// sequence's continuity, the protocol.
pub fn verify_store(
    store: &dyn JournalStore,
    url: &str,
    session: Option<&SessionId>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Report, CliError> {
    let failed =
        |doing: String| move |source| CliError::Store { url: StoreName::of(url), doing, source };
    let sessions = match session {
        Some(s) => {
            if store.tail(s).map_err(failed(format!("reading the tail of {s}")))? == Seq(0) {
                return Err(CliError::NoSession { url: StoreName::of(url), session: s.clone() });
            }
            vec![s.clone()]
        }
        None => list_sessions(store, url)?,
    };
    let mut report = Report { scanned: "read session by session".to_owned(), ..Report::default() };
    let total = sessions.len() as u64;
    for (n, s) in sessions.iter().enumerate() {
        progress(n as u64, total);
        let tail = store.tail(s).map_err(failed(format!("reading the tail of {s}")))?;
        let records = match store.read_all(s) {
            Ok(records) => records,
            Err(e) if damaged(&e).is_some() => one_by_one(store, url, s, tail, &mut report)?,
            Err(e) => return Err(failed(format!("reading session {s}"))(e)),
        };
        report.sessions += 1;
        report.events += tail.get().max(records.len() as u64);
        // Dense from where the log starts (a trimmed log at its kept snapshot).
        let start = records.first().map_or(0, |r| r.seq.get());
        let mut dense = Vec::with_capacity(records.len());
        for (i, r) in records.into_iter().enumerate() {
            let want = start.saturating_add(i as u64);
            if r.seq != Seq(want) || &r.session != s {
                report.findings.push(Finding::in_session(
                    s,
                    Some(Seq(want)),
                    format!("expected seq {want} of {s}, read {} seq {}", r.session, r.seq),
                ));
                break;
            }
            dense.push(r);
        }
        protocol(s, &dense, |_| None, &mut report);
    }
    progress(total, total);
    Ok(report)
}

/// Reads a damaged session one event at a time: each damaged or missing event is a finding.
/// Returns the events before the first one.
fn one_by_one(
    store: &dyn JournalStore,
    url: &str,
    session: &SessionId,
    tail: Seq,
    report: &mut Report,
) -> Result<Vec<Record>, CliError> {
    let mut prefix = Vec::new();
    let mut broken = false;
    for seq in 0..tail.get() {
        match store.read(session, Seq(seq)..Seq(seq + 1)) {
            Ok(mut one) => match one.pop() {
                Some(r) if !broken => prefix.push(r),
                Some(_) => {}
                None => {
                    broken = true;
                    let what = format!("seq {seq} is missing: no event is stored there");
                    report.findings.push(Finding::in_session(session, Some(Seq(seq)), what));
                }
            },
            Err(e) => match damaged(&e) {
                Some(what) => {
                    broken = true;
                    report.findings.push(Finding::in_session(session, Some(Seq(seq)), what));
                }
                None => {
                    return Err(CliError::Store {
                        url: StoreName::of(url),
                        doing: format!("reading {session} seq {seq}"),
                        source: e,
                    });
                }
            },
        }
    }
    if broken {
        report.notes.push(format!(
            "session {session}: the protocol is checked up to seq {} only",
            prefix.len()
        ));
    }
    Ok(prefix)
}

/// Checks the store `url` names.
pub fn verify_url(
    url: &str,
    session: Option<&SessionId>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Report, CliError> {
    match StoreUrl::parse(url) {
        Ok(StoreUrl::File(dir)) => verify_file(&dir, url, session, progress),
        _ => {
            let store = open_read(url)?;
            verify_store(&*store, url, session, progress)
        }
    }
}

/// Writes the report as lines: each problem, each note, and a last line with the verdict.
pub fn write_report(report: &Report, url: &str, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "verify {}: {}, {} session{}, {} events read",
        StoreName::of(url),
        report.scanned,
        report.sessions,
        if report.sessions == 1 { "" } else { "s" },
        report.events
    )?;
    for f in &report.findings {
        let tag = if f.torn_tail { "note" } else { "problem" };
        writeln!(out, "{tag}: {}", Shown(f))?;
    }
    for n in &report.notes {
        writeln!(out, "note: {}", Shown(n))?;
    }
    match report.problems() {
        0 => writeln!(out, "clean: no problems found"),
        1 => writeln!(out, "1 problem found"),
        n => writeln!(out, "{n} problems found"),
    }
}

/// Runs `stepjournal verify`.
pub fn run(args: &VerifyArgs, out: &mut dyn Write, term: Terminal) -> Result<(), CliError> {
    let session = args.session.as_deref().map(SessionId::from_stored);
    let bytes = matches!(StoreUrl::parse(&args.store), Ok(StoreUrl::File(_)));
    let mut bar = Progress::new(term.progress, "verify", bytes);
    let result =
        verify_url(&args.store, session.as_ref(), &mut |done, total| bar.update(done, total));
    bar.finish();
    let report = result?;
    if args.json {
        let value = json!({
            "store": StoreName::of(&args.store).as_str(),
            "clean": report.problems() == 0,
            "problems": report.problems(),
            "sessions": report.sessions,
            "events": report.events,
            "scanned": report.scanned,
            "findings": report.findings.iter().map(Finding::to_json).collect::<Vec<_>>(),
            "notes": report.notes,
        });
        writeln!(out, "{value}")?;
    } else {
        write_report(&report, &args.store, out)?;
    }
    match report.problems() {
        0 => Ok(()),
        count => Err(CliError::Findings { url: StoreName::of(&args.store), count }),
    }
}
