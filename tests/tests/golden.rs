//! Golden files: every format version ever written decodes, byte for byte, forever.
//!
//! `tests/fixtures/vN/events.bin` holds batch frames in format version N with every event type
//! and a session deletion (version 2 adds each member it introduced, present and absent);
//! `events.jsonl` holds the same events as export lines. The test decodes the binary, re-encodes
//! it in its version and demands the same bytes, and prints the events and demands the same text.
//! To write the files of a new format version, run once with `STEPJOURNAL_BLESS=N`; never
//! re-bless an existing version.

use std::collections::BTreeSet;
use std::path::PathBuf;

use stepjournal_codec::batch::{self, Frame, FrameKind};
use stepjournal_codec::{
    Event, EventKind, FormatVersion, Limits, Record, Seq, SessionId, Stamped, UnixMillis, json,
};
use stepjournal_tests::sample::{
    every_event_type, every_event_type_v2, every_event_type_v4, every_event_type_v5, holdable_in,
};

fn dir(version: FormatVersion) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(format!("v{}", version.code()))
}

fn limits(version: FormatVersion) -> Limits {
    Limits { write_version: version, ..Limits::default() }
}

fn write_fixtures(version: FormatVersion, events: &[Event]) {
    let limits = limits(version);
    let mut buf = Vec::new();
    let session = SessionId::new("golden-session").unwrap();
    let (head, tail) = events.split_at(5);
    let stamp = |from: u64, es: &[Event]| -> Vec<Stamped> {
        es.iter()
            .enumerate()
            .map(|(i, e)| Stamped::at(UnixMillis(1_750_000_000_000 + from + i as u64), e.clone()))
            .collect()
    };
    batch::encode_into(&mut buf, &session, Seq(0), &stamp(0, head), &limits).unwrap();
    batch::encode_into(&mut buf, &session, Seq(5), &stamp(5, tail), &limits).unwrap();
    batch::encode_delete_into(&mut buf, &SessionId::new("deleted-session").unwrap(), &limits)
        .unwrap();
    std::fs::create_dir_all(dir(version)).unwrap();
    std::fs::write(dir(version).join("events.bin"), &buf).unwrap();
    let mut lines = String::new();
    for rec in decode_all(&buf) {
        lines.push_str(&json::record_to_export_line(&rec));
        lines.push('\n');
    }
    std::fs::write(dir(version).join("events.jsonl"), lines).unwrap();
}

fn decode_all(bytes: &[u8]) -> Vec<Record> {
    let limits = Limits::default();
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let (frame, len) = Frame::parse(&bytes[at..], &limits).unwrap();
        if frame.kind == FrameKind::Events {
            out.extend(frame.decode_all().unwrap());
        }
        at += len;
    }
    out
}

/// Decodes version `version`'s fixture, re-encodes it in that version and checks the bytes, the
/// event types and the JSON form.
fn check(version: FormatVersion, events: &[Event]) {
    if std::env::var("STEPJOURNAL_BLESS").is_ok_and(|v| v == version.code().to_string()) {
        write_fixtures(version, events);
    }
    let limits = limits(version);
    let path = dir(version).join("events.bin");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut at = 0;
    let mut reencoded = Vec::new();
    let mut kinds = BTreeSet::new();
    let mut deleted = Vec::new();
    let mut decoded = Vec::new();
    while at < bytes.len() {
        let (frame, len) = Frame::parse(&bytes[at..], &limits).unwrap();
        match frame.kind {
            FrameKind::Events => {
                let records = frame.decode_all().unwrap();
                kinds.extend(records.iter().map(|r| r.event.kind()));
                batch::encode_records_into(&mut reencoded, &records, &limits).unwrap();
                decoded.extend(records.into_iter().map(|r| r.event));
            }
            FrameKind::DeleteSession => {
                let s = SessionId::from_stored(frame.deleted_session().unwrap());
                batch::encode_delete_into(&mut reencoded, &s, &limits).unwrap();
                deleted.push(s);
            }
        }
        at += len;
    }
    assert_eq!(reencoded, bytes, "re-encoding version {version:?} changed its bytes");
    assert_eq!(decoded, events, "version {version:?} decodes to other events");
    let all: BTreeSet<EventKind> =
        EventKind::ALL.iter().copied().filter(|k| k.since() <= version).collect();
    assert_eq!(kinds, all, "the fixture must hold every event type of its version");
    assert_eq!(deleted, vec![SessionId::new("deleted-session").unwrap()]);

    let text = std::fs::read_to_string(dir(version).join("events.jsonl")).unwrap();
    let printed: Vec<String> = decode_all(&bytes).iter().map(json::record_to_export_line).collect();
    let expected: Vec<&str> = text.lines().collect();
    assert_eq!(printed, expected, "the JSON form of version {version:?} events changed");
    for line in expected {
        let rec = json::record_from_export_line(line).unwrap();
        assert_eq!(json::record_to_export_line(&rec), line);
    }
}

#[test]
fn version_1_fixtures_decode_and_reencode_byte_for_byte() {
    check(FormatVersion::V1, &holdable_in(every_event_type(), FormatVersion::V1));
}

#[test]
fn version_2_fixtures_decode_and_reencode_byte_for_byte() {
    check(FormatVersion::V2, &holdable_in(every_event_type_v2(), FormatVersion::V2));
}

#[test]
fn version_3_fixtures_decode_and_reencode_byte_for_byte() {
    check(FormatVersion::V3, &every_event_type_v2());
}

#[test]
fn version_4_fixtures_decode_and_reencode_byte_for_byte() {
    check(FormatVersion::V4, &every_event_type_v4());
}

#[test]
fn version_5_fixtures_decode_and_reencode_byte_for_byte() {
    check(FormatVersion::V5, &every_event_type_v5());
}

#[test]
fn a_version_4_writer_refuses_a_trim_and_a_version_4_record_cannot_hold_one() {
    let session = SessionId::new("rolling").unwrap();
    let trimmed = every_event_type_v5().pop().unwrap();
    assert_eq!(trimmed.kind(), EventKind::Trimmed);
    let stamped = [Stamped::at(UnixMillis(1), trimmed)];
    let mut buf = Vec::new();
    let e = batch::encode_into(&mut buf, &session, Seq(0), &stamped, &limits(FormatVersion::V4))
        .unwrap_err();
    assert!(e.to_string().contains("needs version 5"), "{e}");
    assert!(buf.is_empty(), "nothing is written");
}

#[test]
fn a_version_2_writer_refuses_a_snapshot_and_a_version_2_record_cannot_hold_one() {
    // A rolling deploy writes version 2 until every reader reads version 3: a snapshot is
    // refused, never written in a version its readers would misread.
    let session = SessionId::new("rolling").unwrap();
    let snapshot = every_event_type().into_iter().find(|e| e.kind() == EventKind::Snapshot);
    let stamped = [Stamped::at(UnixMillis(1), snapshot.unwrap())];
    let mut buf = Vec::new();
    let e = batch::encode_into(&mut buf, &session, Seq(0), &stamped, &limits(FormatVersion::V2))
        .unwrap_err();
    assert!(e.to_string().contains("needs version 3"), "{e}");
    // The same record with its version byte set to 2 (and its checksum mended) is refused by
    // the reader as malformed, not read as something else.
    batch::encode_into(&mut buf, &session, Seq(0), &stamped, &limits(FormatVersion::V3)).unwrap();
    let (frame, _) = Frame::parse(&buf, &Limits::default()).unwrap();
    let record = frame.records().next().unwrap().unwrap();
    let mut bytes = record.bytes.to_vec();
    bytes[8] = 2;
    let crc = crc32fast::hash(&bytes[4..]);
    bytes[..4].copy_from_slice(&crc.to_le_bytes());
    let e = stepjournal_codec::record::decode(&bytes, &Limits::default()).unwrap_err();
    assert!(e.to_string().contains("needs version 3"), "{e}");
}

#[test]
fn a_version_1_writer_refuses_metadata_and_leaves_the_rule_out() {
    // A rolling deploy keeps writing version 1 until every reader is upgraded: metadata, which
    // version 1 cannot hold, is refused rather than dropped; a pairing's rule (the explain
    // trail's, recomputable) is left out.
    let v1 = limits(FormatVersion::V1);
    let session = SessionId::new("rolling").unwrap();
    for event in holdable_in(every_event_type_v2(), FormatVersion::V2) {
        let carries_metadata = match &event {
            Event::ReplyCommitted(r) => r.metadata.is_some(),
            Event::ToolResult(t) => t.metadata.is_some(),
            _ => false,
        };
        let stamped = [Stamped::at(UnixMillis(1), event.clone())];
        let mut buf = Vec::new();
        let written = batch::encode_into(&mut buf, &session, Seq(0), &stamped, &v1);
        if carries_metadata {
            let e = written.unwrap_err();
            assert!(e.to_string().contains("format version 1"), "{e}");
            continue;
        }
        written.unwrap();
        let (records, _) = batch::decode(&buf, &v1).unwrap();
        let mut expected = event;
        if let Event::Paired(p) = &mut expected {
            p.rule = None;
        }
        assert_eq!(records[0].event, expected);
        assert_eq!(buf[16 + 8], 1, "the record says version 1");
    }
}

#[test]
fn version_4_holds_who_why_and_continuation_and_version_3_refuses_them() {
    // Beside the golden file of version 4 (`tests/fixtures/v4`): the members version 4 added
    // round-trip through a version-4 record and its JSON form, and a version-3
    // writer refuses an event carrying one rather than drop it, while the same kinds without
    // them are written in version 3 as before.
    let session = SessionId::new("rolling").unwrap();
    let mut carried = 0;
    for event in every_event_type_v4() {
        let carries = match &event {
            Event::RunStarted(r) => r.by.is_some(),
            Event::RunEnded(r) => r.by.is_some(),
            Event::ModelAborted(m) => m.continuation.is_some(),
            _ => false,
        };
        let stamped = [Stamped::at(UnixMillis(1), event.clone())];
        let mut buf = Vec::new();
        batch::encode_into(&mut buf, &session, Seq(0), &stamped, &limits(FormatVersion::V4))
            .unwrap();
        let (records, _) = batch::decode(&buf, &Limits::default()).unwrap();
        assert_eq!(records[0].event, event);
        let line = json::record_to_export_line(&records[0]);
        assert_eq!(json::record_from_export_line(&line).unwrap().event, event, "{line}");
        let mut buf = Vec::new();
        let v3 =
            batch::encode_into(&mut buf, &session, Seq(0), &stamped, &limits(FormatVersion::V3));
        if carries {
            carried += 1;
            let e = v3.unwrap_err();
            assert!(e.to_string().contains("cannot be written in format version 3"), "{e}");
            assert!(buf.is_empty(), "nothing is written");
        } else if event.kind().since() > FormatVersion::V3 {
            // A kind version 4 added (`forked_from`) is refused whole.
            assert!(v3.unwrap_err().to_string().contains("needs version 4"));
        } else {
            v3.unwrap();
        }
    }
    assert_eq!(carried, 4, "every new member is present somewhere");
}

#[test]
fn absent_who_why_and_continuation_leave_the_json_form_as_it_was() {
    let line = |e: &Event| json::event_to_json(e);
    for event in every_event_type_v4() {
        let text = line(&event);
        match &event {
            Event::RunStarted(r) if r.by.is_none() => assert!(!text.contains("\"by\""), "{text}"),
            Event::RunEnded(r) if r.by.is_none() => assert!(!text.contains("\"by\""), "{text}"),
            Event::ModelAborted(m) if m.continuation.is_none() => {
                assert!(!text.contains("continuation"), "{text}")
            }
            Event::RunStarted(r) if r.by.as_ref().is_some_and(|b| b.reason().is_some()) => {
                assert_eq!(
                    text,
                    r#"{"type":"run_started","run":"r4","entry":{"kind":"wake"},"by":{"name":"ana","reason":"customer confirmed by phone, ticket #42"}}"#
                );
            }
            Event::ModelAborted(_) => assert_eq!(
                text,
                r#"{"type":"model_aborted","partial":"the first half","continuation":"resp_bg_01J9"}"#
            ),
            _ => {}
        }
    }
}
