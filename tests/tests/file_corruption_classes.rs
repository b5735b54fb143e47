//! Every class of damage the audit tried, at many places, on small journals: bit flips, zeroed
//! blocks, truncations and garbage appended, in segments and in sidecars; sidecars swapped
//! between segments, stale (another journal's) and forged (checksum made to hold). Each case
//! must give an error that names the damaged file and byte (verify's finding, or the open's
//! refusal), or the exact data; a case that gives neither is silent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stepjournal_backends::JournalStore;
use stepjournal_backends::file::io::Io;
use stepjournal_backends::file::sim::SimDisk;
use stepjournal_backends::file::{FileOptions, verify_dir_with};
use stepjournal_codec::{Limits, Seq};
use stepjournal_tests::file_fixture::{
    crash_event, crash_session, grouped_journal, open_sim, sim_dir,
};
use stepjournal_tests::sidecar_forge::Sidecar;

const SESSIONS: usize = 4;

/// A journal of three or more 4 KiB segments whose groups hold several frames, the sealed
/// ones with sidecars; its files, and how many events each session has.
fn journal(rounds: u64) -> (Vec<(PathBuf, Vec<u8>)>, u64) {
    let disk = SimDisk::new();
    let store = grouped_journal(&disk, FileOptions::new().segment_size(4096), SESSIONS, rounds);
    store.wait_reclaimed();
    drop(store);
    let files = disk
        .files(&sim_dir())
        .into_iter()
        .filter(|(p, _)| p.file_name().is_some_and(|n| n != "LOCK"))
        .map(|(p, _)| {
            let bytes = disk.read_file(&p).unwrap();
            (p, bytes)
        })
        .collect();
    (files, rounds)
}

/// A fresh disk holding `files`.
fn disk_of(files: &[(PathBuf, Vec<u8>)]) -> SimDisk {
    let disk = SimDisk::new();
    disk.create_dir_all(&sim_dir()).unwrap();
    for (p, bytes) in files {
        let f = disk.create_new(p).unwrap();
        f.write_all_at(bytes, 0).unwrap();
        f.sync_data().unwrap();
    }
    disk.sync_dir(&sim_dir()).unwrap();
    disk
}

/// One case: the damaged file, the first damaged byte, and the journal's files after it.
struct Case {
    class: &'static str,
    file: PathBuf,
    at: u64,
    files: Vec<(PathBuf, Vec<u8>)>,
}

fn with(
    files: &[(PathBuf, Vec<u8>)],
    path: &Path,
    change: impl FnOnce(&mut Vec<u8>),
) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = files.to_vec();
    if let Some((_, bytes)) = out.iter_mut().find(|(p, _)| p == path) {
        change(bytes);
    }
    out
}

fn is_sidecar(p: &Path) -> bool {
    p.extension().is_some_and(|x| x == "idx")
}

/// A change made to a decoded sidecar.
type Forge = Box<dyn Fn(&mut Sidecar)>;

/// Every case of every class, at positions spread over each file.
fn cases(files: &[(PathBuf, Vec<u8>)], other: &[(PathBuf, Vec<u8>)]) -> Vec<Case> {
    let mut out = Vec::new();
    for (path, bytes) in files {
        let len = bytes.len() as u64;
        let stride = if is_sidecar(path) { 5 } else { 61 };
        let mut at = 0;
        while at < len {
            for (class, mask) in [("bit flip", 0x01u8), ("bit flip", 0x80)] {
                let files = with(files, path, |b| b[at as usize] ^= mask);
                out.push(Case { class, file: path.clone(), at, files });
            }
            let n = 64.min(len - at) as usize;
            if bytes[at as usize..at as usize + n].iter().any(|b| *b != 0) {
                let files = with(files, path, |b| b[at as usize..at as usize + n].fill(0));
                let first = bytes[at as usize..].iter().position(|b| *b != 0).unwrap() as u64;
                out.push(Case { class: "zeroed block", file: path.clone(), at: at + first, files });
            }
            let files = with(files, path, |b| b.truncate(at as usize));
            out.push(Case { class: "truncation", file: path.clone(), at, files });
            at += stride * 3 + 1;
        }
        for n in [1usize, 16, 100] {
            let files = with(files, path, |b| b.extend(std::iter::repeat_n(0xA5, n)));
            out.push(Case { class: "garbage appended", file: path.clone(), at: len, files });
        }
    }
    let sides: Vec<&(PathBuf, Vec<u8>)> = files.iter().filter(|(p, _)| is_sidecar(p)).collect();
    // Sidecars swapped between segments.
    for pair in sides.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let files = with(&with(files, &a.0, |x| x.clone_from(&b.1)), &b.0, |x| x.clone_from(&a.1));
        out.push(Case { class: "sidecars swapped", file: a.0.clone(), at: 0, files });
    }
    // Stale: another journal's sidecar of the same segment.
    for (p, bytes) in other.iter().filter(|(p, _)| is_sidecar(p)) {
        if files.iter().any(|(q, _)| q == p) {
            let files = with(files, p, |x| x.clone_from(bytes));
            out.push(Case { class: "stale sidecar", file: p.clone(), at: 0, files });
        }
    }
    // Forged: one entry's field changed, the checksum made to hold.
    let names: Vec<String> = (0..SESSIONS).map(|s| crash_session(s).to_string()).collect();
    for (path, bytes) in &sides {
        let side = Sidecar::decode(bytes).unwrap();
        for (i, f) in side.frames.iter().enumerate() {
            let forged: [(&str, Forge); 5] = [
                ("forged seq", Box::new(move |s: &mut Sidecar| s.frames[i].first += 1)),
                ("forged count", Box::new(move |s: &mut Sidecar| s.frames[i].count += 1)),
                ("forged len", Box::new(move |s: &mut Sidecar| s.frames[i].len += 1)),
                ("forged offset", Box::new(move |s: &mut Sidecar| s.frames[i].offset += 1)),
                ("forged session", {
                    let other = names.iter().find(|n| **n != f.session).unwrap().clone();
                    Box::new(move |s: &mut Sidecar| s.frames[i].session.clone_from(&other))
                }),
            ];
            for (class, forge) in forged {
                let mut s = side.clone();
                forge(&mut s);
                let files = with(files, path, |x| *x = s.encode());
                out.push(Case { class, file: path.clone(), at: f.offset, files });
            }
        }
    }
    out
}

/// What one case gave.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// verify (or the open) named the damaged file and a byte at or before the damage.
    Named,
    /// Every session reads exactly what was written.
    Exact,
    /// Neither: what was seen.
    Silent(String),
}

fn judge(case: &Case, rounds: u64) -> Outcome {
    let disk = disk_of(&case.files);
    let report =
        verify_dir_with(Arc::new(disk.clone()), &sim_dir(), &Limits::default(), &mut |_, _| {})
            .unwrap();
    let names = |segment: &Path, offset: u64| {
        // A sidecar's damage may be named at the segment byte its entry describes.
        segment == case.file && (offset <= case.at || is_sidecar(&case.file))
    };
    if report.findings.iter().any(|f| names(&f.segment, f.offset)) {
        return Outcome::Named;
    }
    let store = match open_sim(&disk, FileOptions::new().read_only(true)) {
        Ok(store) => store,
        Err(e) => {
            let text = e.to_string();
            let file = case.file.file_name().unwrap().to_string_lossy().into_owned();
            return if text.contains(&file) && text.contains("byte") {
                Outcome::Named
            } else {
                Outcome::Silent(format!("the open refused: {text}; verify: {:?}", report.findings))
            };
        }
    };
    for s in 0..SESSIONS {
        let session = crash_session(s);
        let read = store.read(&session, Seq(0)..Seq(rounds + 1));
        let exact = read.as_ref().is_ok_and(|log| {
            log.len() as u64 == rounds
                && log
                    .iter()
                    .enumerate()
                    .all(|(i, r)| r.seq == Seq(i as u64) && r.event == crash_event(s, i as u64))
        });
        if !exact {
            let seen = match read {
                Ok(log) => format!("{} events", log.len()),
                Err(e) => e.to_string(),
            };
            return Outcome::Silent(format!(
                "session {s} read {seen}; verify: {:?}",
                report.findings.iter().map(ToString::to_string).collect::<Vec<_>>()
            ));
        }
    }
    Outcome::Exact
}

#[test]
fn every_corruption_class_is_named_or_leaves_the_data_exact() {
    let (files, rounds) = journal(30);
    let (other, _) = journal(31);
    let segments = files.iter().filter(|(p, _)| !is_sidecar(p)).count();
    let sidecars = files.len() - segments;
    assert!(segments >= 3 && sidecars >= 2, "{segments} segments, {sidecars} sidecars");
    let cases = cases(&files, &other);
    let mut by_class: std::collections::BTreeMap<&str, (u32, u32, u32)> = Default::default();
    let mut silent = Vec::new();
    for case in &cases {
        let outcome = judge(case, rounds);
        let counts = by_class.entry(case.class).or_default();
        match outcome {
            Outcome::Named => counts.0 += 1,
            Outcome::Exact => counts.1 += 1,
            Outcome::Silent(what) => {
                counts.2 += 1;
                silent.push(format!(
                    "{} at byte {} of {}: {what}",
                    case.class,
                    case.at,
                    case.file.display()
                ));
            }
        }
    }
    println!(
        "{} cases on a journal of {segments} segments and {sidecars} sidecars, {} silent",
        cases.len(),
        silent.len()
    );
    for (class, (named, exact, quiet)) in &by_class {
        println!("  {class}: {named} named, {exact} exact, {quiet} silent");
    }
    assert!(silent.is_empty(), "{} silent cases:\n{}", silent.len(), silent.join("\n"));
}
