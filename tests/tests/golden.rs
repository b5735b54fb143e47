//! Golden files: every format version ever written decodes, byte for byte, forever.
//!
//! `tests/fixtures/v1/events.bin` holds batch frames in format version 1 with every event type and
//! a session deletion; `events.jsonl` holds the same events as export lines. The test decodes the
//! binary, re-encodes it and demands the same bytes, and prints the events and demands the same
//! text. To write the files for a new format version, run once with `STEPJOURNAL_BLESS=1`; never
//! re-bless an existing version.

use std::collections::BTreeSet;
use std::path::PathBuf;

use stepjournal_codec::batch::{self, Frame, FrameKind};
use stepjournal_codec::{EventKind, Limits, Record, Seq, SessionId, Stamped, UnixMillis, json};
use stepjournal_tests::sample::every_event_type;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join("v1")
}

fn write_fixtures() {
    let limits = Limits::default();
    let events = every_event_type();
    let mut buf = Vec::new();
    let session = SessionId::new("golden-session").unwrap();
    let (head, tail) = events.split_at(5);
    let stamp = |from: u64, es: &[stepjournal_codec::Event]| -> Vec<Stamped> {
        es.iter()
            .enumerate()
            .map(|(i, e)| Stamped::at(UnixMillis(1_750_000_000_000 + from + i as u64), e.clone()))
            .collect()
    };
    batch::encode_into(&mut buf, &session, Seq(0), &stamp(0, head), &limits).unwrap();
    batch::encode_into(&mut buf, &session, Seq(5), &stamp(5, tail), &limits).unwrap();
    batch::encode_delete_into(&mut buf, &SessionId::new("deleted-session").unwrap(), &limits)
        .unwrap();
    std::fs::create_dir_all(dir()).unwrap();
    std::fs::write(dir().join("events.bin"), &buf).unwrap();
    let mut lines = String::new();
    for rec in decode_all(&buf) {
        lines.push_str(&json::record_to_export_line(&rec));
        lines.push('\n');
    }
    std::fs::write(dir().join("events.jsonl"), lines).unwrap();
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

#[test]
fn version_1_fixtures_decode_and_reencode_byte_for_byte() {
    if std::env::var_os("STEPJOURNAL_BLESS").is_some() {
        write_fixtures();
    }
    let limits = Limits::default();
    let bytes = std::fs::read(dir().join("events.bin")).expect("tests/fixtures/v1/events.bin");
    let mut at = 0;
    let mut reencoded = Vec::new();
    let mut kinds = BTreeSet::new();
    let mut deleted = Vec::new();
    while at < bytes.len() {
        let (frame, len) = Frame::parse(&bytes[at..], &limits).unwrap();
        match frame.kind {
            FrameKind::Events => {
                let records = frame.decode_all().unwrap();
                kinds.extend(records.iter().map(|r| r.event.kind()));
                batch::encode_records_into(&mut reencoded, &records, &limits).unwrap();
            }
            FrameKind::DeleteSession => {
                let s = SessionId::from_stored(frame.deleted_session().unwrap());
                batch::encode_delete_into(&mut reencoded, &s, &limits).unwrap();
                deleted.push(s);
            }
        }
        at += len;
    }
    assert_eq!(reencoded, bytes, "re-encoding version 1 changed its bytes");
    let all: BTreeSet<EventKind> = EventKind::ALL.iter().copied().collect();
    assert_eq!(kinds, all, "the fixture must hold every event type");
    assert_eq!(deleted, vec![SessionId::new("deleted-session").unwrap()]);

    let text = std::fs::read_to_string(dir().join("events.jsonl")).unwrap();
    let printed: Vec<String> = decode_all(&bytes).iter().map(json::record_to_export_line).collect();
    let expected: Vec<&str> = text.lines().collect();
    assert_eq!(printed, expected, "the JSON form of version 1 events changed");
    for line in expected {
        let rec = json::record_from_export_line(line).unwrap();
        assert_eq!(json::record_to_export_line(&rec), line);
    }
}
