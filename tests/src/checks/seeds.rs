//! Seed inputs made from real encodings, for the corpora under `fuzz/corpus/`: the golden
//! fixture's frames and records, journals written by the file backend (whole, rotated, with a
//! deletion, torn by a power loss), and the conformance scenarios.
//!
//! `cargo test -p stepjournal-tests --test fuzz_corpus -- --ignored write_seed_corpora` writes
//! them into the corpus directories (then minimise with `cargo fuzz cmin`, see
//! `fuzz/README.md`); the replay test runs them through the checks every time as well.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stepjournal_backends::file::sim::{Fate, SimDisk};
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::batch::{self, Frame};
use stepjournal_codec::{Limits, Seq, SessionId, Stamped, UnixMillis};

use crate::sample::{every_event_type, numbered};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The golden fixture's bytes (empty if it cannot be read).
fn golden() -> Vec<u8> {
    std::fs::read(root().join("fixtures").join("v1").join("events.bin")).unwrap_or_default()
}

/// The seeds of fuzz target `target`, named.
pub fn seed_inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    match target {
        "record_batch" => record_batch(),
        "file_journal" => file_journal(),
        "scenario_json" => scenarios(),
        "fold_plan" | "file_ops" => noise(target),
        _ => Vec::new(),
    }
}

fn record_batch() -> Vec<(String, Vec<u8>)> {
    let bytes = golden();
    let limits = Limits::default();
    let mut out = vec![("golden-events-bin".to_owned(), bytes.clone())];
    let mut at = 0usize;
    let mut n = 0;
    while let Some(rest) = bytes.get(at..).filter(|r| !r.is_empty()) {
        let Ok((frame, len)) = Frame::parse(rest, &limits) else { break };
        out.push((format!("golden-frame-{n}"), rest.get(..len).unwrap_or_default().to_vec()));
        for (k, r) in frame.records().enumerate() {
            let Ok(r) = r else { break };
            out.push((format!("golden-frame-{n}-record-{k}"), r.bytes.to_vec()));
        }
        at += len;
        n += 1;
    }
    let session = SessionId::from_stored("seed");
    for (i, e) in every_event_type().into_iter().enumerate() {
        let mut buf = Vec::new();
        let stamped = [Stamped::at(UnixMillis(i as u64), e)];
        if batch::encode_into(&mut buf, &session, Seq(i as u64), &stamped, &limits).is_ok() {
            out.push((format!("event-type-{i}-frame"), buf));
        }
    }
    out
}

fn sim_dir() -> &'static Path {
    Path::new("/seed/journal")
}

/// The segment files of the journal on `disk`, concatenated, after a flags byte.
fn journal_input(disk: &SimDisk, flags: u8) -> Vec<u8> {
    let mut out = vec![flags];
    for (path, _) in disk.files(sim_dir()) {
        if path.extension().is_some_and(|e| e == "seg") {
            out.extend(disk.read_file(&path).unwrap_or_default());
        }
    }
    out
}

fn append_all(store: &FileStore, sessions: u64, per: u64, from: u64) {
    for s in 0..sessions {
        let sid = SessionId::from_stored(format!("seed-{s}"));
        for q in from..from + per {
            let e = [Stamped::at(UnixMillis(q), numbered(s * 1000 + q))];
            let _ = store.append(&sid, Seq(q), &e, Durability::Synced);
        }
    }
}

fn file_journal() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let options = FileOptions::new().segment_size(4096).preallocate(0);
    let open = |disk: &SimDisk| FileStore::open_with(Arc::new(disk.clone()), sim_dir(), options);

    let disk = SimDisk::new();
    if let Ok(store) = open(&disk) {
        append_all(&store, 2, 3, 0);
        let every: Vec<Stamped> =
            every_event_type().into_iter().map(|e| Stamped::at(UnixMillis(9), e)).collect();
        let _ =
            store.append(&SessionId::from_stored("seed-all"), Seq(0), &every, Durability::Synced);
        drop(store);
        out.push(("small-journal".to_owned(), journal_input(&disk, 0)));
        out.push(("small-journal-resealed".to_owned(), journal_input(&disk, 1)));
    }

    let disk = SimDisk::new();
    if let Ok(store) = open(&disk) {
        append_all(&store, 3, 30, 0);
        let _ = store.delete(&SessionId::from_stored("seed-1"));
        append_all(&store, 1, 5, 30);
        drop(store);
        out.push(("rotated-with-deletion".to_owned(), journal_input(&disk, 1)));
    }

    let disk = SimDisk::new();
    if let Ok(store) = open(&disk) {
        append_all(&store, 2, 4, 0);
        let sid = SessionId::from_stored("seed-0");
        let tail = [Stamped::at(UnixMillis(1), numbered(77))];
        let _ = store.append(&sid, Seq(4), &tail, Durability::Buffered);
        let _ = store.append(&sid, Seq(5), &tail, Durability::Buffered);
        let torn = disk.crash(|op| match op {
            stepjournal_backends::file::sim::PendingOp::Write { len, .. } => Fate::Tear(len / 2),
            _ => Fate::Keep,
        });
        drop(store);
        out.push(("torn-tail".to_owned(), journal_input(&torn, 0)));
    }
    out
}

fn scenarios() -> Vec<(String, Vec<u8>)> {
    let dir = root().join("conformance").join("cases");
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .filter_map(|p| {
                    let name = p.file_stem()?.to_string_lossy().into_owned();
                    Some((format!("conformance-{name}"), std::fs::read(&p).ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Structured targets have no encoding to start from: a few deterministic byte strings, which
/// [`arbitrary`] decodes into inputs of several sizes.
fn noise(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ target.len() as u64;
    [16usize, 64, 256, 1024]
        .iter()
        .map(|&len| {
            let bytes = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 24) as u8
                })
                .collect();
            (format!("noise-{len}"), bytes)
        })
        .collect()
}
