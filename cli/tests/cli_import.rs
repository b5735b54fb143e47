//! `stepjournal import` refusing what it cannot take whole, each refusal naming its line and
//! writing nothing: bytes that are not UTF-8, JSON nested too deep, times out of range.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

mod cli_support;

use std::path::{Path, PathBuf};

use cli_support::*;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The export of the fixture's `stuck` session, as lines (header first).
fn stuck_export() -> Vec<String> {
    let source = file_place();
    populate(&*source.open());
    bin_ok(&["export", &source.url, "stuck"], 0).lines().map(str::to_owned).collect()
}

/// Imports `bytes` into a new file journal; returns the exit status and standard error, and
/// checks nothing was written.
fn import_refused(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "in.jsonl", bytes);
    let target = file_place();
    let out = bin(&["import", file.to_str().unwrap(), "--to", &target.url]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nothing was imported"), "{err}");
    assert!(!target.path().exists(), "the target was created: {err}");
    err
}

#[test]
fn a_line_that_is_not_utf8_is_refused_naming_its_line() {
    // Defect: invalid UTF-8 in an import was reported as "stream did not contain valid UTF-8",
    // with no line number, while every other import error names its line.
    let lines = stuck_export();
    let mut bytes = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if i == 3 {
            bytes.extend_from_slice(&line.as_bytes()[..20]);
            bytes.extend_from_slice(b"\xff\xfe");
            bytes.extend_from_slice(&line.as_bytes()[20..]);
        } else {
            bytes.extend_from_slice(line.as_bytes());
        }
        bytes.push(b'\n');
    }
    let err = import_refused(&bytes);
    assert!(err.contains("in.jsonl line 4:") && err.contains("not UTF-8"), "{err}");
    assert!(err.contains("byte 21"), "{err}");
}
