//! Bytes of a format version newer than this build reads are no damage: opening refuses them
//! with their own error, in every mode, and cuts or removes nothing; verify names them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stepjournal_backends::file::layout::{GROUP_HEADER_LEN, GroupHeader, SEGMENT_HEADER_LEN};
use stepjournal_backends::file::sim::SimDisk;
use stepjournal_backends::file::{FileOptions, FileProblem, OnCorruption, verify_dir_with};
use stepjournal_backends::{Durability, JournalStore, OpenError, StoreError};
use stepjournal_codec::{Coded, DecodeError, ErrorCode, FormatPart, Message, Role, Seq, SessionId};
use stepjournal_codec::{Stamped, UnixMillis};
use stepjournal_tests::file_fixture::{open_sim, sim_dir};

fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

fn seg(id: u64) -> PathBuf {
    sim_dir().join(format!("{id:020}.seg"))
}

fn options() -> FileOptions {
    FileOptions::new().segment_size(4096)
}

/// Sessions `a` and `b`, 8 events each, one append per event, alternating; with `seal`, enough
/// after them that segment 1 is sealed.
fn journal(seal: bool) -> SimDisk {
    let disk = SimDisk::new();
    let store = open_sim(&disk, options()).unwrap();
    for q in 0..8 {
        for s in ["a", "b"] {
            let e =
                Stamped::at(UnixMillis(q), Message { role: Role::User, text: format!("{s}{q}") });
            store.append(&sid(s), Seq(q), &[e], Durability::Synced).unwrap();
        }
    }
    let mut q = 0;
    while seal && disk.read_file(&seg(2)).is_none() {
        let e = Stamped::at(UnixMillis(q), Message { role: Role::User, text: "f".repeat(300) });
        store.append(&sid("filler"), Seq(q), &[e], Durability::Synced).unwrap();
        q += 1;
    }
    store.wait_reclaimed();
    drop(store);
    disk
}

/// Writes `new` over the file at `path` on `disk`, byte by byte.
fn overwrite(disk: &SimDisk, path: &Path, new: &[u8]) {
    let old = disk.read_file(path).unwrap();
    for (i, (o, n)) in old.iter().zip(new).enumerate() {
        if o != n {
            assert!(disk.flip_byte(path, i as u64, o ^ n));
        }
    }
}

/// The offset of each frame of segment bytes `s` (one frame per group here).
fn frames(s: &[u8]) -> Vec<usize> {
    let mut at = SEGMENT_HEADER_LEN;
    let mut out = Vec::new();
    while let Ok(g) = GroupHeader::parse(&s[at..]) {
        out.push(at + GROUP_HEADER_LEN);
        at += GROUP_HEADER_LEN + g.len as usize;
    }
    out
}

/// Gives the one record of the frame at `f` format version `version`, its checksums made whole.
fn record_version(s: &mut [u8], f: usize, version: u8) {
    let u32_at = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().unwrap());
    let flen = u32_at(s, f + 4) as usize;
    let r = f + 16;
    let rlen = u32_at(s, r + 4) as usize;
    s[r + 8] = version;
    let crc = crc32fast::hash(&s[r + 4..r + 8 + rlen]);
    s[r..r + 4].copy_from_slice(&crc.to_le_bytes());
    let crc = crc32fast::hash(&s[f + 4..f + 16 + flen]);
    s[f..f + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Opens in both modes, and read-only: each refused with the newer-format error naming
/// `part` and `version`; not a byte of the journal changed.
fn refused_in_every_mode(disk: &SimDisk, part: FormatPart, version: u16) {
    let before = disk.files(&sim_dir());
    let images: Vec<_> = before.iter().map(|(p, _)| disk.read_file(p)).collect();
    let modes = [
        options(),
        options().on_corruption(OnCorruption::TruncateAtCorruption),
        options().read_only(true),
    ];
    for opts in modes {
        let err = open_sim(disk, opts).unwrap_err();
        let OpenError::Store(StoreError::NewerFormat { source, .. }) = &err else {
            panic!("{opts:?}: not the newer-format error: {err:?}");
        };
        assert!(
            matches!(source, DecodeError::NewerVersion { part: p, version: v, .. } if *p == part && *v == version),
            "{source:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("newer stepjournal") && text.contains(&format!("{version}")),
            "{text}"
        );
        assert_eq!(err.code(), ErrorCode::NewerFormat);
    }
    assert_eq!(disk.files(&sim_dir()), before, "nothing was cut or removed");
    let after: Vec<_> = before.iter().map(|(p, _)| disk.read_file(p)).collect();
    assert_eq!(after, images, "not a byte changed");
    let report =
        verify_dir_with(Arc::new(disk.clone()), &sim_dir(), &Default::default(), &mut |_, _| {})
            .unwrap();
    assert!(
        report.findings.iter().any(|f| matches!(f.problem, FileProblem::NewerFormat(_))),
        "{:?}",
        report.findings
    );
}

#[test]
fn a_record_of_a_newer_version_is_refused_in_every_mode_and_never_cut() {
    // A record of a version past this build's (3 when this build read up to 2) was reported
    // as corrupt data with the advice to open with OnCorruption::TruncateAtCorruption, which
    // cut the session from 8 events to 7 with no torn copy.
    let disk = journal(false);
    let mut s = disk.read_file(&seg(1)).unwrap();
    let last = *frames(&s).last().unwrap();
    let newer = stepjournal_codec::FormatVersion::NEWEST.code() + 1;
    record_version(&mut s, last, newer);
    overwrite(&disk, &seg(1), &s);
    refused_in_every_mode(&disk, FormatPart::Record, u16::from(newer));
}

#[test]
fn a_segment_header_of_a_newer_version_is_refused_in_every_mode_and_never_removed() {
    // A segment header of version 2 was corrupt data; the salvage mode removed the segment and
    // both of its sessions.
    let disk = journal(true);
    let mut s = disk.read_file(&seg(1)).unwrap();
    s[8..10].copy_from_slice(&2u16.to_le_bytes());
    let crc = crc32fast::hash(&s[..24]);
    s[24..28].copy_from_slice(&crc.to_le_bytes());
    overwrite(&disk, &seg(1), &s);
    // A sidecar would spare the scan of segment 1; the header is read whatever the mode.
    refused_in_every_mode(&disk, FormatPart::Segment, 2);
}
