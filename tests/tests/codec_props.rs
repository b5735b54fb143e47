//! Properties of the codec: the JSON and binary forms round-trip every event, and damaged bytes are
//! always detected, never a panic.

use proptest::prelude::*;
use stepjournal_codec::record::{self, RecordRef};
use stepjournal_codec::{
    DecodeError, EncodeError, Event, Limits, Record, Seq, SessionId, Stamped, UnixMillis, batch,
    json,
};
use stepjournal_tests::arb;

fn config() -> ProptestConfig {
    ProptestConfig { cases: 256, max_shrink_iters: 512, ..ProptestConfig::default() }
}

fn records_bytes(session: &SessionId, events: &[Event]) -> (Vec<u8>, Vec<usize>) {
    let mut buf = Vec::new();
    let mut ends = Vec::new();
    for (i, e) in events.iter().enumerate() {
        record::encode_into(
            &mut buf,
            session,
            Seq(i as u64),
            UnixMillis(i as u64),
            e,
            &Limits::default(),
        )
        .unwrap();
        ends.push(buf.len());
    }
    (buf, ends)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn json_to_binary_and_back_is_the_identity(event in arb::event(), session in arb::session_id(), seq in any::<u64>(), at in any::<u64>()) {
        let text = json::event_to_json(&event);
        let parsed = json::parse_event(&text).unwrap();
        prop_assert_eq!(&parsed, &event);
        let rec = Record { session, seq: Seq(seq), at: UnixMillis(at), event: parsed };
        let bytes = record::encode(&rec, &Limits::default()).unwrap();
        let (back, used) = record::decode(&bytes, &Limits::default()).unwrap();
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(&back, &rec);
        prop_assert_eq!(json::event_to_json(&back.event), text);
        let line = json::record_to_export_line(&back);
        prop_assert!(!line.contains('\n'), "an export line is one line: {}", line);
        prop_assert_eq!(json::record_from_export_line(&line).unwrap(), rec);
    }

    #[test]
    fn a_records_length_and_place_are_read_from_its_header_whatever_its_checksum_says(
        event in arb::event(),
        session in arb::session_id(),
        seq in any::<u64>(),
        flip in any::<u8>(),
    ) {
        let mut bytes = Vec::new();
        record::encode_into(&mut bytes, &session, Seq(seq), UnixMillis(1), &event, &Limits::default())
            .unwrap();
        // Damage the checksum: the length and the place still read.
        bytes[0] ^= flip | 1;
        prop_assert_eq!(record::peek_len(&bytes, &Limits::default()).unwrap(), bytes.len());
        prop_assert_eq!(record::peek_place(&bytes), Some((session.as_str(), Seq(seq))));
        let tight = Limits { max_record: bytes.len() as u32 - 1, ..Limits::default() };
        let too_large = matches!(record::peek_len(&bytes, &tight), Err(DecodeError::TooLarge { .. }));
        prop_assert!(too_large);
        prop_assert_eq!(record::peek_place(&bytes[..record::PREFIX_LEN + 5]), None);
    }

    #[test]
    fn every_single_byte_flip_in_a_batch_is_detected(
        events in prop::collection::vec(arb::event(), 1..4),
        session in arb::session_id(),
        pos in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let stamped: Vec<Stamped> = events.into_iter().map(|e| Stamped::at(UnixMillis(7), e)).collect();
        let mut buf = Vec::new();
        batch::encode_into(&mut buf, &session, Seq(3), &stamped, &Limits::default()).unwrap();
        let i = pos.index(buf.len());
        buf[i] ^= flip;
        let result = batch::decode(&buf, &Limits::default());
        prop_assert!(result.is_err(), "a flip at byte {} of {} went unnoticed", i, buf.len());
    }

    #[test]
    fn every_single_byte_flip_in_a_record_is_detected(
        event in arb::event(),
        pos in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let (mut buf, _) = records_bytes(&SessionId::new("s").unwrap(), &[event]);
        let i = pos.index(buf.len());
        buf[i] ^= flip;
        prop_assert!(record::decode(&buf, &Limits::default()).is_err(), "flip at {} unnoticed", i);
    }

    #[test]
    fn a_cut_inside_a_record_is_truncated_and_a_cut_at_a_boundary_is_a_shorter_log(
        events in prop::collection::vec(arb::event(), 1..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let (buf, ends) = records_bytes(&SessionId::new("s-cut").unwrap(), &events);
        let cut = cut.index(buf.len() + 1);
        let bytes = &buf[..cut];
        let mut at = 0;
        let mut decoded = 0;
        while at < bytes.len() {
            match record::decode(&bytes[at..], &Limits::default()) {
                Ok((_, len)) => { at += len; decoded += 1; }
                Err(DecodeError::Truncated { .. }) => break,
                Err(other) => return Err(TestCaseError::fail(format!("cut at {cut}: {other}"))),
            }
        }
        let whole = ends.iter().filter(|&&e| e <= cut).count();
        prop_assert_eq!(decoded, whole);
        if ends.contains(&cut) || cut == 0 {
            prop_assert_eq!(at, cut, "a cut at a boundary leaves nothing undecoded");
        } else {
            prop_assert!(at < cut, "a cut inside a record must be reported truncated");
        }
    }

    #[test]
    fn a_cut_batch_is_never_accepted(
        events in prop::collection::vec(arb::event(), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let stamped: Vec<Stamped> = events.into_iter().map(|e| Stamped::at(UnixMillis(1), e)).collect();
        let mut buf = Vec::new();
        batch::encode_into(&mut buf, &SessionId::new("s").unwrap(), Seq(0), &stamped, &Limits::default()).unwrap();
        let cut = cut.index(buf.len());
        let err = batch::decode(&buf[..cut], &Limits::default()).unwrap_err();
        prop_assert!(matches!(err, DecodeError::Truncated { .. }), "cut at {}: {:?}", cut, err);
    }

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let small = Limits { max_record: 4096, max_batch: 8192, ..Limits::default() };
        let _ = record::decode(&bytes, &small);
        let _ = batch::decode(&bytes, &small);
        if let Ok((r, _)) = RecordRef::parse(&bytes, &small) {
            let _ = r.event();
        }
    }

    #[test]
    fn a_record_with_a_valid_checksum_but_a_bad_payload_is_malformed_not_a_panic(
        junk in prop::collection::vec(any::<u8>(), 0..64),
        kind in 1u8..=16,
    ) {
        // Build a record by hand: right checksum, arbitrary payload bytes.
        let sid = b"s";
        let mut body = vec![record::VERSION, kind];
        body.extend_from_slice(&(sid.len() as u16).to_le_bytes());
        body.extend_from_slice(&0u64.to_le_bytes());
        body.extend_from_slice(&0u64.to_le_bytes());
        body.extend_from_slice(sid);
        body.extend_from_slice(&junk);
        let mut rec = Vec::new();
        rec.extend_from_slice(&[0; 4]);
        rec.extend_from_slice(&(body.len() as u32).to_le_bytes());
        rec.extend_from_slice(&body);
        let crc = crc32(&rec[4..]);
        rec[..4].copy_from_slice(&crc.to_le_bytes());
        match record::decode(&rec, &Limits::default()) {
            Ok(_) | Err(DecodeError::Malformed { .. }) => {}
            Err(other) => return Err(TestCaseError::fail(format!("{other:?}"))),
        }
    }
}

fn crc32(bytes: &[u8]) -> u32 {
    // The polynomial the format names: CRC-32 (IEEE), reflected, init and xorout 0xFFFFFFFF.
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[test]
fn an_unknown_kind_and_an_unknown_version_are_told_apart() {
    let (mut buf, _) =
        records_bytes(&SessionId::new("s").unwrap(), &[stepjournal_tests::sample::numbered(1)]);
    let reseal = |b: &mut Vec<u8>| {
        let crc = crc32(&b[4..]);
        b[..4].copy_from_slice(&crc.to_le_bytes());
    };
    buf[9] = 200;
    reseal(&mut buf);
    assert_eq!(
        record::decode(&buf, &Limits::default()).unwrap_err(),
        DecodeError::UnknownKind { code: 200 }
    );
    buf[9] = 2;
    buf[8] = 9;
    reseal(&mut buf);
    // A version past those this build reads is a newer stepjournal's, never damage.
    assert_eq!(
        record::decode(&buf, &Limits::default()).unwrap_err(),
        DecodeError::NewerVersion {
            part: stepjournal_codec::FormatPart::Record,
            version: 9,
            newest: u16::from(stepjournal_codec::FormatVersion::NEWEST.code())
        }
    );
    buf[8] = 0;
    reseal(&mut buf);
    assert_eq!(
        record::decode(&buf, &Limits::default()).unwrap_err(),
        DecodeError::UnknownVersion { version: 0 }
    );
}

#[test]
fn a_length_past_the_limit_is_refused_before_anything_is_allocated() {
    let mut buf = vec![0u8; 8];
    buf[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    let err = record::decode(&buf, &Limits::default()).unwrap_err();
    assert!(matches!(err, DecodeError::TooLarge { .. }), "{err:?}");
    let mut frame = vec![0u8; batch::HEADER_LEN];
    frame[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    let err = batch::decode(&frame, &Limits::default()).unwrap_err();
    assert!(matches!(err, DecodeError::TooLarge { .. }), "{err:?}");
}

#[test]
fn an_event_over_the_record_limit_is_refused_not_split() {
    let limits = Limits { max_record: 1024, max_batch: 1 << 20, ..Limits::default() };
    let event = stepjournal_tests::sample::oversized(2000);
    let err = record::encode_into(
        &mut Vec::new(),
        &SessionId::new("s").unwrap(),
        Seq(0),
        UnixMillis(0),
        &event,
        &limits,
    )
    .unwrap_err();
    assert!(err.to_string().contains("maximum record size of 1024"), "{err}");
}

#[test]
fn an_empty_batch_is_refused_as_its_frame_would_be_on_read() {
    // Pins a defect: `batch::encode_into` wrote an events frame with no record, which
    // `Frame::parse` refuses, so a caller could store bytes no reader accepts.
    let limits = Limits::default();
    let mut buf = b"kept".to_vec();
    let err = batch::encode_into(&mut buf, &SessionId::new("s").unwrap(), Seq(0), &[], &limits);
    assert_eq!(err, Err(EncodeError::EmptyBatch));
    let err = batch::encode_records_into(&mut buf, &[], &limits);
    assert_eq!(err, Err(EncodeError::EmptyBatch));
    assert_eq!(buf, b"kept", "nothing was written");
    // The frame an empty batch would have been: a header counting no record, sealed.
    let mut frame = vec![0u8; batch::HEADER_LEN];
    frame[12..14].copy_from_slice(&1u16.to_le_bytes());
    let crc = crc32(&frame[4..]);
    frame[..4].copy_from_slice(&crc.to_le_bytes());
    let err = batch::decode(&frame, &limits).unwrap_err();
    assert!(matches!(err, DecodeError::Malformed { .. }), "{err:?}");
}
