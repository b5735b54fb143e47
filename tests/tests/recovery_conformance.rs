//! Every recovery conformance case, in process: decode → fold → plan → JSON, compared with the
//! case's `expect` as FORMAT.md's checker section says.

use std::path::{Path, PathBuf};

use stepjournal::scenario::{Scenario, check, expect_of};

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/cases")
}

fn case_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_case_plans_as_its_expect_says() {
    let files = case_files(&cases_dir());
    assert!(files.len() >= 30, "the public suite has 30 cases, found {}", files.len());
    let mut failures = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(file).unwrap();
        let scenario = match Scenario::parse(&text) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{name}: malformed: {e}"));
                continue;
            }
        };
        let plan: serde_json::Value = serde_json::from_str(&scenario.plan().to_json()).unwrap();
        let expect = expect_of(&text).unwrap();
        let diffs = check(&plan, &expect);
        if !diffs.is_empty() {
            failures.push(format!("{name} ({}): {}", scenario.name, diffs.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn the_copy_of_the_cases_is_identical_to_the_shared_suite() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance/cases");
    if !shared.is_dir() {
        println!("note: {} does not exist here; the copy is not compared", shared.display());
        return;
    }
    let name = |p: &PathBuf| p.file_name().unwrap().to_owned();
    let ours = case_files(&cases_dir());
    let theirs = case_files(&shared);
    assert_eq!(
        ours.iter().map(name).collect::<Vec<_>>(),
        theirs.iter().map(name).collect::<Vec<_>>(),
        "tests/conformance/cases and ../shared/conformance/cases hold different files"
    );
    for (a, b) in ours.iter().zip(&theirs) {
        assert!(
            std::fs::read(a).unwrap() == std::fs::read(b).unwrap(),
            "{} differs from {}",
            a.display(),
            b.display()
        );
    }
}
