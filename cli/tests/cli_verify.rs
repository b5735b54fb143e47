//! `stepjournal verify` through the binary: clean journals on every backend, damaged file and
//! SQLite journals, protocol faults; exit 0 only when clean.

mod cli_support;

use std::path::{Path, PathBuf};

use cli_support::*;
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_codec::{CallKind, PairReason, Replay, SessionId};

/// The segment files of a journal directory, in order.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    v.sort();
    v
}

/// Flips one bit of the first occurrence of `needle` in `file`; returns the byte's offset.
fn flip(file: &Path, needle: &[u8]) -> u64 {
    let mut bytes = std::fs::read(file).unwrap();
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("the needle is there");
    bytes[at + 2] ^= 0x20;
    std::fs::write(file, &bytes).unwrap();
    (at + 2) as u64
}

/// `(offset, len)` of a `problem:` line's "at byte O (L bytes)".
fn place_of(line: &str) -> (u64, u64) {
    let rest = &line[line.find("at byte ").unwrap() + 8..];
    let offset: u64 = rest[..rest.find(' ').unwrap()].parse().unwrap();
    let rest = &rest[rest.find('(').unwrap() + 1..];
    let len: u64 = rest[..rest.find(' ').unwrap()].parse().unwrap();
    (offset, len)
}

#[test]
fn every_fixture_journal_is_clean_on_every_backend() {
    for place in populated() {
        let out = bin_ok(&["verify", &place.url], 0);
        assert!(out.lines().last().unwrap() == "clean: no problems found", "{}: {out}", place.name);
        assert!(out.contains("6 sessions, 52 events read"), "{}: {out}", place.name);
        let one = bin_ok(&["verify", &place.url, "stuck"], 0);
        assert!(one.contains("1 session, 8 events read"), "{}: {one}", place.name);
        let json: serde_json::Value =
            serde_json::from_str(&bin_ok(&["verify", &place.url, "--json"], 0)).unwrap();
        assert_eq!((json["clean"].as_bool(), json["problems"].as_u64()), (Some(true), Some(0)));
    }
}

#[test]
fn a_flipped_byte_in_acknowledged_data_is_reported_at_its_record_and_exits_1() {
    let place = file_place();
    populate(&*place.open());
    let dir = place.path();
    let seg = segments(&dir).pop().unwrap();
    let at = flip(&seg, b"charging 42.00 EUR");
    let out = bin(&["verify", &place.url]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let problems: Vec<&str> = stdout.lines().filter(|l| l.starts_with("problem: ")).collect();
    assert_eq!(problems.len(), 1, "{stdout}");
    let line = problems[0];
    assert!(line.contains(&seg.display().to_string()), "{line}");
    assert!(line.contains("session stuck seq 7"), "{line}");
    assert!(line.contains("checksum mismatch"), "{line}");
    assert!(line.contains("valid data follows"), "{line}");
    let (offset, len) = place_of(line);
    assert!(offset <= at && at < offset + len, "byte {at} is not in {offset}..{}", offset + len);
    assert!(stderr(&out).contains("verify found 1 problem in"), "{}", stderr(&out));
    // Asking for another session leaves the damage of `stuck` out.
    let other = bin_ok(&["verify", &place.url, "finished"], 0);
    assert!(other.ends_with("clean: no problems found\n"), "{other}");
    // The other commands refuse the damaged journal, naming the place and pointing to verify.
    let out = bin(&["sessions", &place.url]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(&seg.display().to_string()) && err.contains("stepjournal verify"),
        "{err}"
    );
}

#[test]
fn damage_in_several_segments_is_all_reported() {
    let place = file_place();
    let dir = place.path();
    {
        let store = FileStore::open(&dir, FileOptions::new().segment_size(4096)).unwrap();
        for round in 0..6 {
            for (name, batches) in fixture() {
                append_session(&store, &format!("{name}-{round}"), &batches, T0);
            }
        }
    }
    let segs = segments(&dir);
    assert!(segs.len() >= 4, "{segs:?}");
    let a = flip(&segs[0], b"find a table for two");
    let b = flip(&segs[2], b"Lotus");
    let out = bin(&["verify", &place.url]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let problems: Vec<&str> = stdout.lines().filter(|l| l.starts_with("problem: ")).collect();
    assert_eq!(problems.len(), 2, "{stdout}");
    for (line, seg, at) in [(problems[0], &segs[0], a), (problems[1], &segs[2], b)] {
        assert!(line.contains(&seg.display().to_string()), "{line}");
        let (offset, len) = place_of(line);
        assert!(offset <= at && at < offset + len, "{line}: byte {at}");
    }
    assert!(stdout.ends_with("2 problems found\n"), "{stdout}");
}

#[test]
fn a_torn_tail_is_noted_but_is_not_a_problem() {
    let place = file_place();
    populate(&*place.open());
    let seg = segments(&place.path()).pop().unwrap();
    // The last bytes of data (the writer's zeros ahead of the data follow them) are lost.
    let mut bytes = std::fs::read(&seg).unwrap();
    let end = bytes.iter().rposition(|b| *b != 0).unwrap() + 1;
    bytes[end - 7..end].fill(0);
    std::fs::write(&seg, &bytes).unwrap();
    let out = bin_ok(&["verify", &place.url], 0);
    let note = out.lines().find(|l| l.starts_with("note: ")).expect("a note");
    assert!(note.contains("torn tail") && note.contains(&seg.display().to_string()), "{note}");
    assert!(out.ends_with("clean: no problems found\n"), "{out}");
}

#[test]
fn a_protocol_fault_is_reported_with_its_session_seq_and_place() {
    for place in places() {
        let store = place.open();
        populate(&*store);
        let bad = vec![
            vec![run_started("run-1", stepjournal_codec::Entry::Wake)],
            vec![
                reply(
                    1,
                    "cp-1",
                    "",
                    vec![call("c1", "charge_card", Replay::Unsafe, CallKind::Tool)],
                ),
                dispatch("c1", "d-1"),
            ],
            vec![attempt("c1", 2)],
            vec![result("c1", 2, "{}"), paired("c1", PairReason::OutcomeUnknown, "")],
        ];
        append_session(&*store, "faulty", &bad, T0);
        drop(store);
        let out = bin(&["verify", &place.url]);
        assert_eq!(out.status.code(), Some(1), "{}", place.name);
        let stdout = String::from_utf8(out.stdout.clone()).unwrap();
        let problems: Vec<&str> = stdout.lines().filter(|l| l.starts_with("problem: ")).collect();
        assert_eq!(problems.len(), 2, "{}: {stdout}", place.name);
        assert!(
            problems[0].contains("session faulty seq 3") && problems[0].contains("attempt 2"),
            "{}",
            problems[0]
        );
        assert!(
            problems[1].contains("session faulty seq 5")
                && problems[1].contains("already resolved"),
            "{}",
            problems[1]
        );
        if place.name == "file" {
            assert!(problems[0].contains(".seg at byte "), "{}", problems[0]);
        }
    }
}

#[test]
fn a_snapshot_that_is_not_the_fold_of_the_log_before_it_is_a_problem() {
    for place in places() {
        let store = place.open();
        populate(&*store);
        let log = vec![
            vec![run_started("run-1", stepjournal_codec::Entry::Wake)],
            vec![reply(1, "cp-1", "", vec![])],
            vec![stepjournal_codec::Event::StepCommit(stepjournal_codec::StepCommit {
                step: stepjournal_codec::StepNo(1),
                checkpoint: "cp-1-commit".into(),
            })],
        ];
        append_session(&*store, "snapped", &log, T0);
        let events: Vec<stepjournal_codec::Event> = store
            .read_all(&stepjournal_codec::SessionId::new("snapped").unwrap())
            .unwrap()
            .into_iter()
            .map(|r| r.event)
            .collect();
        let mut snapshot = stepjournal_recovery::fold(&events).snapshot().unwrap();
        let right = stepjournal_codec::Event::from(snapshot.clone());
        snapshot.run = None;
        let wrong = stepjournal_codec::Event::from(snapshot);
        append_session(&*store, "snapped", &vec![vec![right], vec![wrong]], T0);
        drop(store);
        let out = bin(&["verify", &place.url]);
        assert_eq!(out.status.code(), Some(1), "{}", place.name);
        let stdout = String::from_utf8(out.stdout.clone()).unwrap();
        let problems: Vec<&str> = stdout.lines().filter(|l| l.starts_with("problem: ")).collect();
        assert_eq!(problems.len(), 1, "{}: {stdout}", place.name);
        assert!(
            problems[0].contains("session snapped seq 4")
                && problems[0].contains("snapshot disagrees with the fold"),
            "{}",
            problems[0]
        );
    }
}

#[test]
fn a_damaged_sqlite_row_is_reported_by_session_and_seq() {
    let place = sqlite_place();
    populate(&*place.open());
    // The store is closed: its WAL is checkpointed into the database file, where the record
    // may also be left in pages no longer in use: every copy is damaged.
    let db = place.path();
    let mut bytes = std::fs::read(&db).unwrap();
    let needle = b"charging 42.00 EUR";
    let mut copies = 0;
    for at in 0..bytes.len() - needle.len() {
        if &bytes[at..at + needle.len()] == needle {
            bytes[at + 2] ^= 0x20;
            copies += 1;
        }
    }
    assert!(copies > 0);
    std::fs::write(&db, &bytes).unwrap();
    let out = bin(&["verify", &place.url]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let problems: Vec<&str> = stdout.lines().filter(|l| l.starts_with("problem: ")).collect();
    assert_eq!(problems.len(), 1, "{stdout}");
    let expect = "problem: session stuck seq 7: the stored record is damaged: checksum mismatch";
    assert!(problems[0].starts_with(expect), "{stdout}");
    assert!(
        stdout.contains("note: session stuck: the protocol is checked up to seq 7 only"),
        "{stdout}"
    );
}

#[test]
fn verify_of_a_missing_session_or_store_exits_2() {
    let place = file_place();
    populate(&*place.open());
    let out = bin(&["verify", &place.url, "nobody"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`nobody`"), "{}", stderr(&out));
    let out = bin(&["verify", "file:/nonexistent/journal"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/nonexistent/journal"), "{}", stderr(&out));
}

/// A store whose session `stuck` has a damaged row at seq 3 and a lost one at seq 5, as an SQL
/// backend reports them.
struct Damaged(stepjournal_backends::memory::MemoryStore);

mod damaged {
    use std::ops::Range;

    use stepjournal_backends::{AppendAck, AppendError, Durability, JournalStore, StoreError};
    use stepjournal_codec::{DecodeError, Record, Seq, SessionId, Stamped};

    use super::Damaged;

    impl JournalStore for Damaged {
        fn max_durability(&self) -> Durability {
            self.0.max_durability()
        }
        fn append(
            &self,
            s: &SessionId,
            expected: Seq,
            events: &[Stamped],
            d: Durability,
        ) -> Result<AppendAck, AppendError> {
            self.0.append(s, expected, events, d)
        }
        fn read(&self, s: &SessionId, range: Range<Seq>) -> Result<Vec<Record>, StoreError> {
            let records = self.0.read(s, range.clone())?;
            if s.as_str() != "stuck" {
                return Ok(records);
            }
            let corrupt = |seq: u64, source| StoreError::Corrupt {
                context: format!("test, session {s}, seq {seq}"),
                source,
            };
            if range.contains(&Seq(3)) {
                return Err(corrupt(3, DecodeError::ChecksumMismatch { stored: 1, computed: 2 }));
            }
            let kept: Vec<Record> = records.into_iter().filter(|r| r.seq != Seq(5)).collect();
            if range.contains(&Seq(5)) && kept.iter().any(|r| r.seq > Seq(5)) {
                let reason = "seq 5 is missing".to_owned();
                return Err(corrupt(5, DecodeError::Malformed { reason }));
            }
            Ok(kept)
        }
        fn tail(&self, s: &SessionId) -> Result<Seq, StoreError> {
            self.0.tail(s)
        }
        fn sessions(&self) -> Result<Vec<SessionId>, StoreError> {
            self.0.sessions()
        }
        fn delete(&self, s: &SessionId) -> Result<bool, StoreError> {
            self.0.delete(s)
        }
    }
}

#[test]
fn a_store_read_one_event_at_a_time_reports_every_damaged_and_missing_row() {
    use stepjournal_cli::verify::verify_store;
    let store = Damaged(stepjournal_backends::memory::MemoryStore::new());
    populate(&store);
    let report = verify_store(&store, "test:", None, &mut |_, _| {}).unwrap();
    let found: Vec<String> = report.findings.iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        [
            "session stuck seq 3: the stored record is damaged: checksum mismatch: stored \
             0x00000001, computed 0x00000002",
            "session stuck seq 5: seq 5 is missing: no event is stored there",
        ]
    );
    assert_eq!(report.notes, ["session stuck: the protocol is checked up to seq 3 only"]);
    assert_eq!((report.sessions, report.events), (6, 52));
    let one =
        verify_store(&store, "test:", Some(&SessionId::new("finished").unwrap()), &mut |_, _| {})
            .unwrap();
    assert_eq!((one.problems(), one.sessions), (0, 1));
}
