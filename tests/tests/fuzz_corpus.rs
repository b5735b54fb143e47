//! Replays the fuzz corpora on stable `cargo test`: every file of `fuzz/corpus/<target>/` and
//! `fuzz/regressions/<target>/` goes through the same check the fuzz target runs (structured
//! inputs decoded the same way, with `arbitrary::Unstructured`), and must pass. The seeds made
//! from real encodings (`checks::seeds`) are replayed as well.
//!
//! Regression inputs for bugs the fuzzers found are kept in `fuzz/regressions/<target>/`; each
//! has a test below naming the bug.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use stepjournal_tests::checks::{self, TARGETS, run_target, seeds::seed_inputs};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("fuzz")
}

/// Runs one input; a panic counts as a failure naming the input.
fn run(target: &str, name: &str, data: &[u8]) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(|| run_target(target, data))) {
        Ok(Some(result)) => result.map_err(|e| format!("{name}: {e}")),
        Ok(None) => Err(format!("{target} is not a fuzz target")),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            Err(format!("{name}: panicked: {what}"))
        }
    }
}

/// The files of `dir`, sorted (none if it does not exist).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

fn replay(target: &str) {
    let corpus = files(&fuzz_dir().join("corpus").join(target));
    assert!(!corpus.is_empty(), "fuzz/corpus/{target} holds no inputs");
    let regressions = files(&fuzz_dir().join("regressions").join(target));
    let mut failures = Vec::new();
    for path in corpus.iter().chain(&regressions) {
        let data = std::fs::read(path).unwrap();
        if let Err(e) = run(target, &path.display().to_string(), &data) {
            failures.push(e);
        }
    }
    for (name, data) in seed_inputs(target) {
        if let Err(e) = run(target, &format!("seed {name}"), &data) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} inputs of {target} fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_record_batch_corpus_replays_clean() {
    replay("record_batch");
}

#[test]
fn the_file_journal_corpus_replays_clean() {
    replay("file_journal");
}

#[test]
fn the_scenario_json_corpus_replays_clean() {
    replay("scenario_json");
}

#[test]
fn the_fold_plan_corpus_replays_clean() {
    replay("fold_plan");
}

#[test]
fn the_fold_plan_corpus_compares_many_plans_from_snapshots() {
    // The snapshot property is checked at every prefix of every log; this says it is checked
    // often enough to mean something.
    let mut total = stepjournal_recovery::Agreement::default();
    for path in files(&fuzz_dir().join("corpus").join("fold_plan")) {
        let data = std::fs::read(&path).unwrap();
        let Some(input) = checks::FoldInput::from_bytes(&data) else { continue };
        let events = input.log();
        let got = checks::snapshot_fold_agrees(
            &input,
            &events,
            &input.registry(),
            &stepjournal_recovery::Config::default(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        total.snapshots += got.snapshots;
        total.plans += got.plans;
        total.needed_history += got.needed_history;
    }
    println!("{total:?}");
    assert!(total.snapshots >= 300 && total.plans >= 10_000, "{total:?}");
}

#[test]
fn the_fold_plan_corpus_compares_many_plans_of_forks() {
    // Forked at committed steps of every log, the fork plans as its whole fold and as the
    // original; this says it is checked often enough to mean something.
    let mut total = stepjournal_recovery::Agreement::default();
    for path in files(&fuzz_dir().join("corpus").join("fold_plan")) {
        let data = std::fs::read(&path).unwrap();
        let Some(input) = checks::FoldInput::from_bytes(&data) else { continue };
        let events = input.log();
        let got = checks::fork_fold_agrees(
            &input,
            &events,
            &input.registry(),
            &stepjournal_recovery::Config::default(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        total.snapshots += got.snapshots;
        total.plans += got.plans;
        total.needed_history += got.needed_history;
    }
    println!("{total:?}");
    assert!(total.snapshots >= 100 && total.plans >= 10_000, "{total:?}");
}

#[test]
fn the_file_ops_corpus_replays_clean() {
    replay("file_ops");
}

#[test]
fn every_target_has_a_corpus_directory_and_a_fuzz_target() {
    for target in TARGETS {
        assert!(fuzz_dir().join("corpus").join(target).is_dir(), "no corpus for {target}");
        let source = fuzz_dir().join("fuzz_targets").join(format!("{target}.rs"));
        assert!(source.is_file(), "no fuzz target {}", source.display());
    }
}

#[test]
fn seeds_from_real_encodings_exist_for_the_byte_targets() {
    for target in ["record_batch", "file_journal", "scenario_json"] {
        assert!(seed_inputs(target).len() >= 3, "{target} has too few seeds");
    }
}

/// Writes the seeds into the corpus directories (run by hand before `cargo fuzz cmin`).
#[test]
#[ignore = "writes fuzz/corpus; run by hand, see fuzz/README.md"]
fn write_seed_corpora() {
    for target in TARGETS {
        let dir = fuzz_dir().join("corpus").join(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, data) in seed_inputs(target) {
            std::fs::write(dir.join(format!("seed-{name}")), data).unwrap();
        }
    }
}

mod the_checks_catch_violations {
    use stepjournal_codec::{Attempt, CallId, Entry, Event};
    use stepjournal_recovery::{Action, Config, NewRun, fold, plan};

    use super::checks;

    fn log() -> Vec<Event> {
        let lines = [
            r#"{"type":"run_started","run":"r1","entry":{"kind":"new_turn","message":"hi"}}"#,
            r#"{"type":"reply_committed","step":1,"checkpoint":"cp-1","calls":[{"call":"c1","tool":"t","replay":"safe"},{"call":"c2","tool":"t","replay":"safe"}]}"#,
            r#"{"type":"dispatch_minted","call":"c1","dispatch":"d1"}"#,
            r#"{"type":"attempt_started","call":"c1","attempt":1}"#,
        ];
        lines.iter().map(|l| stepjournal_codec::json::parse_event(l).unwrap()).collect()
    }

    fn planned() -> (stepjournal_recovery::SessionState, stepjournal_recovery::Plan) {
        let registry = stepjournal_recovery::MemoryRegistry::new()
            .with_tool("t", stepjournal_codec::Replay::Safe);
        let state = fold(&log());
        let run = NewRun { run: "r2".into(), entry: Entry::Wake, commit_checkpoint: "cp-c".into() };
        let p = plan(&state, &run, &registry, &Config::new(2).unwrap());
        (state, p)
    }

    fn check(p: &stepjournal_recovery::Plan) -> Result<(), String> {
        let registry = stepjournal_recovery::MemoryRegistry::new()
            .with_tool("t", stepjournal_codec::Replay::Safe);
        let state = fold(&log());
        checks::check_plan(&state, p, &Entry::Wake, &registry, &Config::new(2).unwrap())
    }

    #[test]
    fn the_real_plan_passes() {
        let (_, p) = planned();
        assert!(p.error.is_none(), "{p:?}");
        check(&p).unwrap();
    }

    #[test]
    fn an_attempt_past_max_bodies_is_caught() {
        let (_, mut p) = planned();
        let c1 = p.calls.iter_mut().find(|c| c.call == CallId::from("c1")).unwrap();
        c1.action = Action::Run { dispatch: None, attempt: Attempt(3) };
        let err = check(&p).unwrap_err();
        assert!(err.contains("attempt 3"), "{err}");
    }

    #[test]
    fn a_call_left_out_of_the_plan_is_caught() {
        let (_, mut p) = planned();
        p.calls.pop();
        assert!(check(&p).unwrap_err().contains("planned calls"));
    }

    #[test]
    fn a_rerun_of_an_unsafe_call_is_caught() {
        let registry = stepjournal_recovery::MemoryRegistry::new()
            .with_tool("t", stepjournal_codec::Replay::Unsafe);
        let (state, mut p) = planned();
        let c1 = p.calls.iter_mut().find(|c| c.call == CallId::from("c1")).unwrap();
        c1.action = Action::Run { dispatch: None, attempt: Attempt(2) };
        let err = checks::check_plan(&state, &p, &Entry::Wake, &registry, &Config::new(2).unwrap())
            .unwrap_err();
        assert!(err.contains("current policy"), "{err}");
    }
}

mod handwritten_inputs {
    use stepjournal_tests::checks::{FileOp, FileOpsInput, check_file_ops};

    fn append(session: u8, synced: bool) -> FileOp {
        FileOp::Append { session, events: 2, size: 40, synced }
    }

    #[test]
    fn appends_deletes_faults_and_crashes_keep_the_model() {
        let ops = vec![
            append(0, true),
            append(1, false),
            append(2, true),
            FileOp::Read { session: 0, from: 0, len: 7 },
            FileOp::PowerLoss { fates: vec![2 + 3 * 40, 0, 1], reorder: true },
            append(1, false),
            FileOp::Delete { session: 0 },
            FileOp::Fail { kind: 2, after: 0 },
            append(2, true),
            FileOp::Read { session: 2, from: 1, len: 3 },
            FileOp::ProcessCrash,
            append(0, false),
            FileOp::PowerAt { after: 1 },
            append(1, true),
            append(1, true),
            FileOp::Reopen,
            FileOp::Read { session: 1, from: 0, len: 7 },
        ];
        let ops = std::iter::repeat_n(ops, 4).flatten().collect();
        check_file_ops(&FileOpsInput { segment: 0, preallocate: true, ops }).unwrap();
    }
}

mod regressions {
    use std::path::PathBuf;
    use std::sync::Arc;

    use stepjournal_backends::file::io::Io;
    use stepjournal_backends::file::sim::SimDisk;
    use stepjournal_backends::file::{FileOptions, FileStore};
    use stepjournal_backends::file::{FileProblem, verify_dir_with};
    use stepjournal_codec::Limits;

    use super::fuzz_dir;

    /// A journal of one segment holding the input's bytes after its flags byte.
    fn one_segment(input: &str) -> (SimDisk, PathBuf) {
        let data = std::fs::read(fuzz_dir().join("regressions").join(input)).unwrap();
        let (disk, dir) = (SimDisk::new(), PathBuf::from("/j"));
        disk.create_dir_all(&dir).unwrap();
        let file = disk.create_new(&dir.join("00000000000000000001.seg")).unwrap();
        file.write_all_at(&data[1..], 0).unwrap();
        file.sync_data().unwrap();
        disk.sync_dir(&dir).unwrap();
        (disk, dir)
    }

    /// Found by the `file_journal` target. Damage at byte 453 is followed by a group header
    /// whose frames run past the end of the file; the header is intact and says 539 bytes were
    /// durable when it was written, so the damage is inside acknowledged data and opening
    /// refuses. `verify_dir` counted only whole groups' durable points, called the damage a torn
    /// tail and the journal clean: the two disagreed. Verify now counts an intact header of a
    /// truncated group as opening does.
    #[test]
    fn verify_counts_the_durable_point_of_a_truncated_groups_intact_header() {
        let (disk, dir) =
            one_segment("file_journal/verify-ignored-durable-claim-of-truncated-group");
        let report =
            verify_dir_with(Arc::new(disk.clone()), &dir, &Limits::default(), &mut |_, _| {})
                .unwrap();
        let at_453 = report.findings.iter().find(|f| f.offset == 453).unwrap();
        assert!(!at_453.torn_tail, "{at_453}");
        assert!(!report.is_clean());
        let options = FileOptions::new().read_only(true);
        let err = FileStore::open_with(Arc::new(disk), &dir, options).unwrap_err();
        assert!(err.to_string().contains("at byte 453"), "{err}");
    }

    /// Found by the `file_journal` target. The group at byte 115 is whole but its frame at
    /// byte 139 is damaged; an intact group header lies at byte 194, inside that group's extent,
    /// saying 539 bytes were durable. Opening looks for intact headers anywhere after damage and
    /// refuses; `verify_dir` resumed at the damaged group's end, never saw the header, and called
    /// the damage a torn tail. Verify now looks inside a damaged group for intact headers too.
    #[test]
    fn verify_sees_an_intact_header_inside_a_damaged_group() {
        let (disk, dir) =
            one_segment("file_journal/verify-ignored-intact-header-inside-damaged-group");
        let report =
            verify_dir_with(Arc::new(disk.clone()), &dir, &Limits::default(), &mut |_, _| {})
                .unwrap();
        let at_139 = report.findings.iter().find(|f| f.offset == 139).unwrap();
        assert!(!at_139.torn_tail, "{at_139}");
        let options = FileOptions::new().read_only(true);
        let err = FileStore::open_with(Arc::new(disk), &dir, options).unwrap_err();
        assert!(err.to_string().contains("at byte 139"), "{err}");
    }

    /// Found by the `file_journal` target (a panic, "attempt to add with overflow"). A resealed
    /// batch whose first record says seq 2^64 - 2 holds more records after it: `verify_dir`
    /// computed each record's expected seq as `first + i`, which overflows (a panic where
    /// overflow checks are on, a wrong expectation where not). It now reports those records as
    /// misdirected instead; the other seq sums in verify are checked too.
    #[test]
    fn verify_reports_a_batch_running_past_the_last_seq_without_overflowing() {
        let data = std::fs::read(
            fuzz_dir().join("regressions/file_journal/verify-seq-overflow-in-batch-near-u64-max"),
        )
        .unwrap();
        let (segs, limits, _) = stepjournal_tests::checks::journal_of_input(&data);
        let disk = stepjournal_tests::checks::build_disk(&segs).unwrap();
        let dir = stepjournal_tests::checks::journal_dir();
        let report = verify_dir_with(Arc::new(disk), &dir, &limits, &mut |_, _| {}).unwrap();
        let past_the_end = report.findings.iter().find(|f| f.offset == 677).unwrap();
        let text = past_the_end.to_string();
        assert!(
            text.contains("from seq 18446744073709551614") && text.contains("misdirected"),
            "{text}"
        );
    }

    /// Found by the `file_journal` target once the check compared verify with open on resealed
    /// input. Session `seed-0`'s batches at seq 0 and seq 1 are intact frames whose events do
    /// not decode (found when read, so the journal opens), and a batch at seq 2 follows. Verify
    /// left both damaged batches out of the session's order and forgave a gap only when one
    /// damaged batch held all of it, so it reported a gap 0..2 that opening never sees. A gap
    /// is now forgiven when damaged batches already reported fill it one after the other.
    #[test]
    fn verify_forgives_a_gap_that_several_damaged_batches_fill() {
        let data = std::fs::read(
            fuzz_dir()
                .join("regressions/file_journal/verify-gap-across-two-content-damaged-batches"),
        )
        .unwrap();
        let (segs, limits, _) = stepjournal_tests::checks::journal_of_input(&data);
        let disk = stepjournal_tests::checks::build_disk(&segs).unwrap();
        let dir = stepjournal_tests::checks::journal_dir();
        let report =
            verify_dir_with(Arc::new(disk.clone()), &dir, &limits, &mut |_, _| {}).unwrap();
        assert!(
            report.findings.iter().all(|f| !matches!(f.problem, FileProblem::SeqGap { .. })),
            "{:?}",
            report.findings
        );
        let mut damaged: Vec<u64> = report
            .findings
            .iter()
            .filter(|f| f.session.as_ref().map(|s| s.as_str()) == Some("seed-0"))
            .filter_map(|f| f.seq.map(|q| q.get()))
            .collect();
        damaged.dedup();
        assert_eq!(damaged, [0, 1], "{:?}", report.findings);
        let options = FileOptions::new().limits(limits).read_only(true);
        FileStore::open_with(Arc::new(disk), &dir, options).unwrap();
    }

    /// Found by the `file_journal` target, left open until opening and verify shared one walk.
    /// A resealed frame at byte 222 (its checksum holds) whose records leave 3 bytes over, and
    /// whose first record starts session `seed-alh` at seq 6: opening checks a frame's first
    /// record and refused the batch as a gap; verify checked every record, found the damaged
    /// one and, judging it by position alone, called the frame a torn tail (journal clean). Now
    /// both refuse: a frame whose checksum holds was written whole, so nothing in it is ever a
    /// torn write; the torn tail begins after it.
    #[test]
    fn a_resealed_frame_with_a_malformed_inner_record_is_refused_by_open_and_verify() {
        let data = std::fs::read(
            fuzz_dir().join("regressions/file_journal/resealed-frame-with-malformed-inner-record"),
        )
        .unwrap();
        let (segs, limits, resealed) = stepjournal_tests::checks::journal_of_input(&data);
        assert!(resealed);
        let disk = stepjournal_tests::checks::build_disk(&segs).unwrap();
        let dir = stepjournal_tests::checks::journal_dir();
        let report =
            verify_dir_with(Arc::new(disk.clone()), &dir, &limits, &mut |_, _| {}).unwrap();
        assert!(!report.is_clean(), "{:?}", report.findings);
        let problem = report.findings.iter().find(|f| !f.torn_tail).unwrap();
        assert_eq!((problem.offset, problem.seq.map(|q| q.get())), (278, Some(7)), "{problem}");
        let torn = report.findings.iter().find(|f| f.torn_tail).unwrap();
        assert_eq!(torn.offset, 281, "{torn}");
        let options = FileOptions::new().limits(limits).read_only(true);
        let err = FileStore::open_with(Arc::new(disk), &dir, options).unwrap_err();
        assert!(err.to_string().contains("at byte 222"), "{err}");
    }
}
