//! The file backend under crashes, on the simulated disk: power lost at every write and sync
//! boundary, unsynced writes torn, dropped and reordered, damage inside acknowledged data, a
//! failed `fdatasync`.
//!
//! The invariant after every crash: each session is a dense prefix of what was attempted and
//! holds every append whose acknowledgement promised durability (a `Synced` append, and every
//! append acknowledged before one); a deletion that was acknowledged stays deleted.

use std::collections::BTreeSet;

use proptest::prelude::*;
use stepjournal_backends::file::sim::{Fate, OpKind, SimDisk};
use stepjournal_backends::file::{FileOptions, FileStore, OnCorruption};
use stepjournal_backends::{AppendError, Durability, JournalStore, OpenError, StoreError};
use stepjournal_codec::{Seq, Stamped, UnixMillis};
use stepjournal_tests::file_fixture::{
    check_prefix, crash_event, crash_session, open_sim, sim_dir,
};

const SESSIONS: usize = 4;

fn options() -> FileOptions {
    FileOptions::new().segment_size(4096)
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Append { s: usize, n: u64, sync: bool },
    Delete { s: usize },
}

/// A small deterministic generator, so a workload is the same on every run.
fn steps(seed: u64, k: usize, deletes: bool, buffered: bool) -> Vec<Step> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..k)
        .map(|_| {
            let r = next();
            let s = (r % SESSIONS as u64) as usize;
            if deletes && r % 23 == 0 {
                Step::Delete { s }
            } else {
                Step::Append { s, n: 1 + (r >> 8) % 3, sync: !buffered || (r >> 16) % 3 != 0 }
            }
        })
        .collect()
}

/// What the workload attempted and what the store promised, per session (session names change
/// with every deletion, so a deleted session is never written again).
#[derive(Debug, Default, Clone)]
struct Model {
    /// Per session name: events attempted (if every attempt landed).
    attempted: Vec<u64>,
    /// Events acknowledged.
    acked: Vec<u64>,
    /// Events whose acknowledgement promised a power loss keeps them.
    durable: Vec<u64>,
    /// Deletions attempted and acknowledged (by session name).
    delete_tried: BTreeSet<usize>,
    deleted: BTreeSet<usize>,
    /// The session name each slot writes to now.
    current: Vec<usize>,
    /// Added to every session name (so two models can share a journal).
    base: usize,
}

impl Model {
    fn new() -> Self {
        Self::with_base(0)
    }

    fn with_base(base: usize) -> Self {
        Model {
            base,
            attempted: vec![0; SESSIONS],
            acked: vec![0; SESSIONS],
            durable: vec![0; SESSIONS],
            current: (0..SESSIONS).collect(),
            ..Model::default()
        }
    }

    fn names(&self) -> usize {
        self.attempted.len()
    }

    /// Runs the steps until the first error. Returns whether all ran. After each step the
    /// store's reclaim thread is waited for, so that its removals and compactions come between
    /// the steps, in the same order on every run (a crash can be placed at each of their
    /// operations too), and a failure of one ends the run as a failed step does.
    fn run(&mut self, store: &FileStore, steps: &[Step]) -> bool {
        store.wait_reclaimed();
        for step in steps {
            if !self.step(store, *step) {
                return false;
            }
            store.wait_reclaimed();
            if store.heads().is_err() {
                return false;
            }
        }
        true
    }

    /// Runs one step; returns whether it succeeded.
    fn step(&mut self, store: &FileStore, step: Step) -> bool {
        {
            match step {
                Step::Append { s, n, sync } => {
                    let name = self.current[s];
                    let from = self.acked[name];
                    let events: Vec<Stamped> = (from..from + n)
                        .map(|q| Stamped::at(UnixMillis(q), crash_event(self.base + name, q)))
                        .collect();
                    self.attempted[name] = from + n;
                    let d = if sync { Durability::Synced } else { Durability::Buffered };
                    match store.append(&crash_session(self.base + name), Seq(from), &events, d) {
                        Ok(ack) => {
                            assert_eq!(ack.next, Seq(from + n));
                            self.acked[name] = from + n;
                            if sync {
                                self.durable.clone_from(&self.acked);
                            }
                        }
                        Err(e) => {
                            assert!(!matches!(e, AppendError::Conflict { .. }), "{e}");
                            return false;
                        }
                    }
                }
                Step::Delete { s } => {
                    let name = self.current[s];
                    self.delete_tried.insert(name);
                    match store.delete(&crash_session(self.base + name)) {
                        Ok(existed) => {
                            assert_eq!(existed, self.acked[name] > 0);
                            self.deleted.insert(name);
                            // A deletion that wrote its frame is synced: everything acknowledged
                            // before it is durable. Deleting a session that never had events
                            // writes nothing.
                            if existed {
                                self.durable.clone_from(&self.acked);
                            }
                            let fresh = self.names();
                            self.attempted.push(0);
                            self.acked.push(0);
                            self.durable.push(0);
                            self.current[s] = fresh;
                        }
                        Err(_) => return false,
                    }
                }
            }
        }
        true
    }

    /// Checks the invariant on a reopened store; returns each session name's surviving length.
    fn check(&self, store: &FileStore) -> Vec<u64> {
        let lens = self.check_sessions(store);
        let listed = store.sessions().unwrap().len();
        let nonempty = lens.iter().filter(|n| **n > 0).count();
        assert_eq!(listed, nonempty, "sessions() lists the non-empty ones");
        lens
    }

    fn check_sessions(&self, store: &FileStore) -> Vec<u64> {
        let mut lens = Vec::new();
        for name in 0..self.names() {
            let log = store.read_all(&crash_session(self.base + name)).unwrap();
            if self.deleted.contains(&name) {
                assert!(
                    log.is_empty(),
                    "session {name} was deleted, yet it holds {} events",
                    log.len()
                );
                lens.push(0);
            } else if self.delete_tried.contains(&name) && log.is_empty() {
                lens.push(0);
            } else {
                let (durable, attempted) = (self.durable[name], self.attempted[name]);
                lens.push(check_prefix(store, self.base + name, durable, attempted));
            }
        }
        lens
    }
}

/// After a recovery: every session takes one more durable append, and a second crash that
/// loses everything unsynced keeps all of them.
fn appends_after_recovery_survive_another_crash(disk: &SimDisk, model: &Model, lens: &[u64]) {
    let store = open_sim(disk, options()).unwrap();
    let mut expect = lens.to_vec();
    for (name, len) in expect.iter_mut().enumerate() {
        if model.delete_tried.contains(&name) && *len == 0 {
            continue;
        }
        let e = Stamped::at(UnixMillis(*len), crash_event(model.base + name, *len));
        let s = crash_session(model.base + name);
        store.append(&s, Seq(*len), &[e], Durability::Synced).unwrap();
        *len += 1;
    }
    let disk = disk.crash_lose_unsynced();
    drop(store);
    let store = open_sim(&disk, options()).unwrap();
    for (name, len) in expect.iter().enumerate() {
        if model.delete_tried.contains(&name) && *len == 0 {
            continue;
        }
        assert_eq!(
            check_prefix(&store, model.base + name, *len, *len),
            *len,
            "session {name} after the second crash"
        );
    }
}

/// How many disk operations the whole workload takes.
fn ops_of(steps: &[Step]) -> u64 {
    let disk = SimDisk::new();
    let store = open_sim(&disk, options()).unwrap();
    assert!(Model::new().run(&store, steps));
    disk.ops()
}

/// A way the power can go: what becomes of the unsynced operations.
type PowerLoss = fn(&SimDisk) -> SimDisk;

fn crash_at_every_operation(steps: &[Step]) {
    let total = ops_of(steps);
    assert!(total as usize >= steps.len(), "every append writes");
    let fates: [(&str, PowerLoss); 3] = [
        ("lose unsynced", SimDisk::crash_lose_unsynced),
        ("keep written", SimDisk::crash_keep_written),
        ("tear every unsynced write in half", |d| {
            d.crash(|op| match op {
                stepjournal_backends::file::sim::PendingOp::Write { len, .. } => {
                    Fate::Tear(len / 2)
                }
                _ => Fate::Keep,
            })
        }),
    ];
    for n in 0..=total {
        for (what, crash) in fates {
            let disk = SimDisk::new();
            disk.crash_at_op(n);
            let mut model = Model::new();
            if let Ok(store) = open_sim(&disk, options()) {
                let finished = model.run(&store, steps);
                assert_eq!(finished, n == total, "op {n}: the workload ran to the crash");
            }
            let after = crash(&disk);
            // (A process crash, then a power loss, is covered below.)
            let store = open_sim(&after, options())
                .unwrap_or_else(|e| panic!("crash at op {n} ({what}): reopening failed: {e}"));
            let lens = model.check(&store);
            drop(store);
            appends_after_recovery_survive_another_crash(&after, &model, &lens);
        }
    }
}

#[test]
fn a_crash_at_every_write_and_sync_keeps_every_acknowledged_append() {
    // 200 appends from 4 sessions, all synced, over 4 KiB segments (rotations included).
    crash_at_every_operation(&steps(1, 200, false, false));
}

#[test]
fn a_crash_at_every_operation_of_a_mixed_workload_keeps_what_was_promised() {
    // Buffered and synced appends and deletions, with segments rotated and removed.
    crash_at_every_operation(&steps(2, 120, true, true));
}

#[derive(Debug, Clone)]
struct CrashCase {
    seed: u64,
    k: usize,
    /// The operation the power goes at, as a fraction of the workload's operations.
    at: f64,
    fates: Vec<(u8, u16)>,
    reverse_order: bool,
    second_crash: Option<u64>,
    /// The first crash is the process's, not the machine's: a writer reopens, runs a second
    /// workload on other sessions, and then the power goes.
    process_first: bool,
}

fn crash_case() -> impl Strategy<Value = CrashCase> {
    (
        any::<u64>(),
        20usize..120,
        0.0f64..1.0,
        proptest::collection::vec((0u8..3, any::<u16>()), 0..64),
        any::<bool>(),
        proptest::option::of(0u64..12),
        any::<bool>(),
    )
        .prop_map(|(seed, k, at, fates, reverse_order, second_crash, process_first)| {
            CrashCase { seed, k, at, fates, reverse_order, second_crash, process_first }
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES raises it for a longer soak.
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(96),
        max_shrink_iters: 64,
        ..ProptestConfig::default()
    })]

    /// Unsynced writes torn at any byte, dropped, or landing out of order (and a second power loss
    /// during recovery): the invariant holds and recovery never panics.
    #[test]
    fn torn_dropped_and_reordered_unsynced_writes_keep_the_invariant(case in crash_case()) {
        let steps = steps(case.seed, case.k, true, true);
        let total = ops_of(&steps);
        let n = (case.at * total as f64) as u64;
        let disk = SimDisk::new();
        disk.crash_at_op(n);
        let mut model = Model::new();
        if let Ok(store) = open_sim(&disk, options()) {
            model.run(&store, &steps);
        }
        let mut second = Model::with_base(1000);
        let disk = if case.process_first {
            // What the killed process wrote is all there; the writer that reopens makes it
            // durable before counting on it.
            let killed = disk.process_crash();
            let store = open_sim(&killed, options())
                .map_err(|e| TestCaseError::fail(format!("reopening after a process crash: {e}")))?;
            let lens = model.check(&store);
            model.durable.clone_from(&lens);
            killed.crash_at_op(killed.ops() + case.seed % 200);
            second.run(&store, &self::steps(case.seed ^ 0x55, 60, true, true));
            drop(store);
            killed
        } else {
            disk
        };
        let mut i = 0usize;
        let fates = &case.fates;
        let fate = |op: stepjournal_backends::file::sim::PendingOp<'_>| {
            let (kind, cut) = fates.get(i % fates.len().max(1)).copied().unwrap_or((0, 0));
            i += 1;
            match (kind, op) {
                (0, _) => Fate::Keep,
                (1, _) => Fate::Drop,
                (_, stepjournal_backends::file::sim::PendingOp::Write { len, .. }) => {
                    Fate::Tear(usize::from(cut) % (len + 1))
                }
                _ => Fate::Keep,
            }
        };
        let reverse = case.reverse_order;
        let mut after = disk.crash_in_order(fate, |n| {
            if reverse { (0..n).rev().collect() } else { (0..n).collect() }
        });
        if let Some(m) = case.second_crash {
            // The power goes again while the journal is being recovered.
            after.crash_at_op(m);
            if let Ok(store) = open_sim(&after, options()) {
                drop(store);
            }
            after = after.crash(|_| Fate::Drop);
        }
        let store = match open_sim(&after, options()) {
            Ok(s) => s,
            Err(e) => return Err(TestCaseError::fail(format!("reopening failed: {e}"))),
        };
        let lens = model.check_sessions(&store);
        let second_lens = second.check_sessions(&store);
        let listed = store.sessions().unwrap().len();
        let nonempty = lens.iter().chain(&second_lens).filter(|n| **n > 0).count();
        prop_assert_eq!(listed, nonempty, "sessions() lists the non-empty ones");
        drop(store);
        appends_after_recovery_survive_another_crash(&after, &model, &lens);
    }
}

/// Options without zeros ahead of the data, for tests that find groups by file length.
fn exact() -> FileOptions {
    FileOptions::new().preallocate(0)
}

fn segment_files(disk: &SimDisk) -> Vec<(std::path::PathBuf, u64)> {
    disk.files(&sim_dir())
        .into_iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "seg"))
        .collect()
}

#[test]
fn a_torn_tail_is_cut_before_the_next_append() {
    let disk = SimDisk::new();
    let store = open_sim(&disk, exact()).unwrap();
    let s = crash_session(0);
    let ev = |q: u64| vec![Stamped::at(UnixMillis(q), crash_event(0, q))];
    store.append(&s, Seq(0), &ev(0), Durability::Synced).unwrap();
    store.append(&s, Seq(1), &ev(1), Durability::Buffered).unwrap();
    let (path, full) = segment_files(&disk).pop().unwrap();
    // The buffered write lands torn: all but its last 5 bytes.
    let after = disk.crash(|op| match op {
        stepjournal_backends::file::sim::PendingOp::Write { len, .. } => Fate::Tear(len - 5),
        _ => Fate::Keep,
    });
    drop(store);
    assert_eq!(after.read_file(&path).unwrap().len() as u64, full - 5);
    let store = open_sim(&after, exact()).unwrap();
    assert_eq!(store.tail(&s).unwrap(), Seq(1), "the torn batch is dropped whole");
    let cut = after.read_file(&path).unwrap().len() as u64;
    assert!(cut < full - 5, "the torn bytes were cut on open");
    // The cut was synced: a power loss right now keeps it, and the next append lands after it.
    store.append(&s, Seq(1), &ev(1), Durability::Synced).unwrap();
    let again = after.crash_lose_unsynced();
    drop(store);
    let store = open_sim(&again, exact()).unwrap();
    assert_eq!(check_prefix(&store, 0, 2, 2), 2);
}

#[test]
fn a_zero_filled_tail_is_a_torn_tail() {
    let disk = SimDisk::new();
    let store = open_sim(&disk, exact()).unwrap();
    let s = crash_session(0);
    store
        .append(&s, Seq(0), &[Stamped::at(UnixMillis(0), crash_event(0, 0))], Durability::Synced)
        .unwrap();
    drop(store);
    let (path, len) = segment_files(&disk).pop().unwrap();
    // The file grew but the data never came: zeros (as a file system may leave after a crash).
    {
        use stepjournal_backends::file::io::Io;
        let f = disk.open(&path, false).unwrap();
        f.set_len(len + 3000).unwrap();
    }
    let store = open_sim(&disk, exact()).unwrap();
    assert_eq!(check_prefix(&store, 0, 1, 1), 1);
    assert_eq!(disk.read_file(&path).unwrap().len() as u64, len, "the zeros were cut");
}

fn append_one(store: &FileStore, q: u64) -> Result<(), AppendError> {
    let e = Stamped::at(UnixMillis(q), crash_event(0, q));
    store.append(&crash_session(0), Seq(q), &[e], Durability::Synced).map(|_| ())
}

#[test]
fn a_crash_while_creating_a_segment_leaves_a_partial_header_that_is_removed() {
    let opts = FileOptions::new().segment_size(4096);
    // Find the append that starts the second segment, and the operation that creates it.
    let disk = SimDisk::new();
    disk.record_ops();
    let store = open_sim(&disk, opts).unwrap();
    let mut q = 0u64;
    while segment_files(&disk).len() < 2 {
        append_one(&store, q).unwrap();
        q += 1;
    }
    drop(store);
    let second = sim_dir().join(format!("{:020}.seg", 2));
    let create_op = disk
        .op_log()
        .iter()
        .position(|(kind, path)| *kind == OpKind::Create && *path == second)
        .unwrap() as u64;
    // Again, losing power after the header write (create, then header), with the header torn.
    let disk = SimDisk::new();
    disk.crash_at_op(create_op + 2);
    let store = open_sim(&disk, opts).unwrap();
    for i in 0..q - 1 {
        append_one(&store, i).unwrap();
    }
    assert!(append_one(&store, q - 1).is_err(), "the power went during this append");
    let after = disk.crash(|op| match op {
        stepjournal_backends::file::sim::PendingOp::Write { .. } => Fate::Tear(11),
        _ => Fate::Keep,
    });
    drop(store);
    let segs = segment_files(&after);
    assert_eq!(segs.len(), 2);
    assert_eq!(segs[1].1, 11, "the new segment holds a partial header");
    let store = open_sim(&after, opts).unwrap();
    assert_eq!(check_prefix(&store, 0, q - 1, q - 1), q - 1);
    let segs = segment_files(&after);
    assert!(segs.iter().all(|(_, len)| *len >= 32), "the partial segment is gone: {segs:?}");
    append_one(&store, q - 1).unwrap();
    assert_eq!(check_prefix(&store, 0, q, q), q);
}

#[test]
fn an_empty_last_segment_opens_and_takes_appends() {
    let opts = FileOptions::new().segment_size(4096);
    let disk = SimDisk::new();
    let store = open_sim(&disk, opts).unwrap();
    drop(store);
    let segs = segment_files(&disk);
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].1, 32, "a new journal is one segment holding its header");
    let store = open_sim(&disk, opts).unwrap();
    assert!(store.sessions().unwrap().is_empty());
    append_one(&store, 0).unwrap();
    assert_eq!(check_prefix(&store, 0, 1, 1), 1);
}

/// Writes `n` synced single-event appends to session 0; returns the disk and the segment path.
fn journal_of(n: u64, opts: FileOptions) -> (SimDisk, std::path::PathBuf) {
    let disk = SimDisk::new();
    let store = open_sim(&disk, opts.preallocate(0)).unwrap();
    for q in 0..n {
        append_one(&store, q).unwrap();
    }
    drop(store);
    let (path, _) = segment_files(&disk).into_iter().next().unwrap();
    (disk, path)
}

fn corrupt_error(r: Result<FileStore, OpenError>) -> String {
    let Err(e) = r else { panic!("a damaged journal opened") };
    match e {
        OpenError::Store(StoreError::Corrupt { .. }) => e.to_string(),
        other => panic!("expected a corruption error, got {other}"),
    }
}

#[test]
fn a_flipped_byte_inside_acknowledged_data_refuses_to_open_naming_segment_and_offset() {
    let (disk, path) = journal_of(10, FileOptions::new());
    let len = disk.read_file(&path).unwrap().len() as u64;
    // Every byte of the first nine groups is acknowledged data followed by later groups.
    let per_group = (len - 32) / 10;
    for offset in (32..32 + 9 * per_group).step_by(7) {
        let d = disk.crash_keep_written();
        assert!(d.flip_byte(&path, offset, 0x40));
        let before = d.read_file(&path).unwrap();
        let err = corrupt_error(open_sim(&d, FileOptions::new()));
        assert!(err.contains(&path.display().to_string()), "{err}");
        let group_start = 32 + (offset - 32) / per_group * per_group;
        let named: u64 = err
            .split("at byte ")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no offset in {err}"));
        assert!(
            (group_start..group_start + per_group).contains(&named),
            "flip at {offset} reported at {named}: {err}"
        );
        assert_eq!(d.read_file(&path).unwrap(), before, "a refused open changes nothing");
    }
}

#[test]
fn salvage_mode_truncates_at_the_corruption_only_when_asked() {
    let (disk, path) = journal_of(10, FileOptions::new());
    let len = disk.read_file(&path).unwrap().len() as u64;
    let per_group = (len - 32) / 10;
    // Damage inside the fifth group.
    assert!(disk.flip_byte(&path, 32 + 4 * per_group + per_group / 2, 0x01));
    corrupt_error(open_sim(&disk, FileOptions::new()));
    // Read-only salvage stops reading there and changes nothing.
    let ro = open_sim(
        &disk,
        FileOptions::new().read_only(true).on_corruption(OnCorruption::TruncateAtCorruption),
    )
    .unwrap();
    assert_eq!(check_prefix(&ro, 0, 4, 4), 4);
    drop(ro);
    assert_eq!(disk.read_file(&path).unwrap().len() as u64, len);
    let salvage = FileOptions::new().on_corruption(OnCorruption::TruncateAtCorruption);
    let store = open_sim(&disk, salvage).unwrap();
    assert_eq!(check_prefix(&store, 0, 4, 4), 4, "everything before the damaged group is kept");
    assert_eq!(disk.read_file(&path).unwrap().len() as u64, 32 + 4 * per_group);
    append_one(&store, 4).unwrap();
    drop(store);
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    assert_eq!(check_prefix(&store, 0, 5, 5), 5, "after salvage the journal opens normally");
}

#[test]
fn damage_in_a_sealed_segment_is_corruption_even_at_its_end() {
    let opts = FileOptions::new().segment_size(4096);
    let disk = SimDisk::new();
    let store = open_sim(&disk, opts).unwrap();
    let mut q = 0;
    while segment_files(&disk).len() < 3 {
        append_one(&store, q).unwrap();
        q += 1;
    }
    drop(store);
    let (first, len) = segment_files(&disk).into_iter().next().unwrap();
    assert!(disk.flip_byte(&first, len - 1, 0x80), "the last byte of a sealed segment");
    let err = corrupt_error(open_sim(&disk, opts));
    assert!(err.contains(&first.display().to_string()) && err.contains("sealed"), "{err}");
}

#[test]
fn a_failed_fdatasync_poisons_the_store_and_nothing_after_it_is_acknowledged() {
    let disk = SimDisk::new();
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    append_one(&store, 0).unwrap();
    disk.fail_next(OpKind::SyncData);
    let err = append_one(&store, 1).unwrap_err();
    assert!(matches!(err, AppendError::OutcomeUnknown { .. }), "{err:?}");
    assert!(err.to_string().contains("fdatasync"), "{err}");
    // Every later call fails, naming the first failure; nothing more is acknowledged.
    for q in 1..4 {
        let later = append_one(&store, q).unwrap_err();
        assert!(later.is_poisoned(), "{later:?}");
        assert!(later.to_string().contains("fdatasync"), "{later}");
    }
    for r in [
        store.tail(&crash_session(0)).map(|_| ()),
        store.read_all(&crash_session(0)).map(|_| ()),
        store.delete(&crash_session(0)).map(|_| ()),
    ] {
        assert!(matches!(r, Err(StoreError::Poisoned { .. })), "{r:?}");
    }
    let writes = disk.ops();
    assert!(append_one(&store, 1).is_err());
    assert_eq!(disk.ops(), writes, "a poisoned store does not touch the disk");
    // The failed sync's data may or may not have reached the disk; reopening re-reads it.
    drop(store);
    let after = disk.crash_lose_unsynced();
    let store = open_sim(&after, FileOptions::new()).unwrap();
    let n = check_prefix(&store, 0, 1, 2);
    append_one(&store, n).unwrap();
}

#[test]
fn a_failed_write_fails_its_whole_group_and_no_one_after_it() {
    let disk = SimDisk::new();
    let store = std::sync::Arc::new(open_sim(&disk, FileOptions::new()).unwrap());
    let writes = disk.ops();
    disk.fail_op(writes);
    let results: Vec<_> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..8)
            .map(|t| {
                let store = &store;
                scope.spawn(move || {
                    let e = Stamped::at(UnixMillis(0), crash_event(t, 0));
                    store.append(&crash_session(t), Seq(0), &[e], Durability::Synced)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        results.iter().all(|r| r.is_err()),
        "no append after a failed write is acknowledged: {results:?}"
    );
    assert!(results.iter().any(|r| matches!(r, Err(AppendError::Store(StoreError::Io { .. })))));
    let store = open_sim(&disk.crash_keep_written(), FileOptions::new()).unwrap();
    for t in 0..8 {
        check_prefix(&store, t, 0, 1);
    }
}

#[test]
fn bytes_a_killed_process_left_unsynced_are_synced_before_later_groups_count_on_them() {
    // A reopened writer must not claim as durable what the dead process never synced: a power
    // loss afterwards could drop those bytes while keeping later groups, and damage under a
    // later group's durable point reads as corruption.
    let disk = SimDisk::new();
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    let s = crash_session(0);
    let ev = |q: u64| vec![Stamped::at(UnixMillis(q), crash_event(0, q))];
    store.append(&s, Seq(0), &ev(0), Durability::Synced).unwrap();
    store.append(&s, Seq(1), &ev(1), Durability::Buffered).unwrap();
    let after_kill = disk.process_crash();
    drop(store);
    let store = open_sim(&after_kill, FileOptions::new()).unwrap();
    store.append(&s, Seq(2), &ev(2), Durability::Buffered).unwrap();
    // Power goes: the first unsynced write (if still unsynced) is lost, the later one lands.
    let mut first = true;
    let power = after_kill.crash(|op| match op {
        stepjournal_backends::file::sim::PendingOp::Write { .. } if first => {
            first = false;
            Fate::Drop
        }
        _ => Fate::Keep,
    });
    drop(store);
    let store = open_sim(&power, FileOptions::new()).unwrap_or_else(|e| {
        panic!("a power loss after a process crash must not read as corruption: {e}")
    });
    let n = check_prefix(&store, 0, 2, 3);
    assert!(n >= 2, "the buffered append from before the kill was synced by the reopen");
}

#[test]
fn zeros_ahead_of_the_data_keep_synced_appends_from_changing_the_file_length() {
    let opts = FileOptions::new().segment_size(1 << 20).preallocate(64 << 10);
    let disk = SimDisk::new();
    let store = open_sim(&disk, opts).unwrap();
    append_one(&store, 0).unwrap();
    let (path, len) = segment_files(&disk).pop().unwrap();
    assert!(len >= 64 << 10, "the segment was extended ahead of the data: {len}");
    for q in 1..50 {
        append_one(&store, q).unwrap();
    }
    assert_eq!(disk.read_file(&path).unwrap().len() as u64, len, "appends wrote into the zeros");
    // After a process crash the zeros are cut on open, and appends go on after the data.
    let disk = disk.process_crash();
    drop(store);
    let store = open_sim(&disk, opts).unwrap();
    assert_eq!(check_prefix(&store, 0, 50, 50), 50);
    append_one(&store, 50).unwrap();
    drop(store);
    let store = open_sim(&disk.crash_lose_unsynced(), opts).unwrap();
    assert_eq!(check_prefix(&store, 0, 51, 51), 51);
}

#[test]
fn damage_under_a_running_store_is_reported_by_the_read_that_meets_it() {
    let disk = SimDisk::new();
    let store = open_sim(&disk, exact()).unwrap();
    for q in 0..10 {
        append_one(&store, q).unwrap();
    }
    let (path, len) = segment_files(&disk).pop().unwrap();
    let per_group = (len - 32) / 10;
    // A bad sector in the sixth batch, after the store indexed it.
    assert!(disk.flip_byte(&path, 32 + 5 * per_group + per_group - 3, 0x04));
    let err = store.read_all(&crash_session(0)).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    let frame_at = 32 + 5 * per_group + 24;
    assert!(msg.contains(&format!("at byte {frame_at}")), "{msg}");
    // The batches before it still read.
    assert_eq!(store.read(&crash_session(0), Seq(0)..Seq(5)).unwrap().len(), 5);
}

#[test]
fn a_torn_length_claiming_gigabytes_is_a_torn_tail_not_an_allocation() {
    use stepjournal_backends::file::io::Io;
    use stepjournal_backends::file::layout::{GROUP_HEADER_LEN, GroupHeader};
    let (disk, path) = journal_of(3, FileOptions::new());
    let end = disk.read_file(&path).unwrap().len() as u64;
    // A whole group header (its checksum right) claiming ~4 GiB of frames that never came.
    let mut huge = [0u8; GROUP_HEADER_LEN];
    GroupHeader { len: u32::MAX - 7, frames: 1, synced: end }.encode_into(&mut huge);
    let f = disk.open(&path, false).unwrap();
    f.write_all_at(&huge, end).unwrap();
    f.write_all_at(&[0xAB; 100], end + GROUP_HEADER_LEN as u64).unwrap();
    drop(f);
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    assert_eq!(check_prefix(&store, 0, 3, 3), 3);
    assert_eq!(
        disk.read_file(&path).unwrap().len() as u64,
        end,
        "cut back to the last whole group"
    );
    drop(store);
    // A small group whose one frame's own length field claims 4 GiB.
    let mut frame = vec![0u8; 40];
    frame[4..8].copy_from_slice(&(u32::MAX - 16).to_le_bytes());
    let mut header = [0u8; GROUP_HEADER_LEN];
    GroupHeader { len: frame.len() as u32, frames: 1, synced: end }.encode_into(&mut header);
    let f = disk.open(&path, false).unwrap();
    f.write_all_at(&header, end).unwrap();
    f.write_all_at(&frame, end + GROUP_HEADER_LEN as u64).unwrap();
    drop(f);
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    assert_eq!(check_prefix(&store, 0, 3, 3), 3);
    assert_eq!(disk.read_file(&path).unwrap().len() as u64, end);
}

#[test]
fn an_append_whose_fdatasync_failed_says_its_outcome_is_unknown_and_can_be_found_on_reopening() {
    // The defect: a failed fdatasync after the group was written was reported as Store(Io),
    // which reads as "not written", yet the batch was there once the journal was reopened.
    let disk = SimDisk::new();
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    append_one(&store, 0).unwrap();
    disk.fail_next(OpKind::SyncData);
    let err = append_one(&store, 1).unwrap_err();
    match &err {
        AppendError::OutcomeUnknown { session, expected, reason, source } => {
            assert_eq!((session, *expected), (&crash_session(0), Seq(1)));
            assert!(reason.contains("fdatasync") && reason.contains("reopen"), "{reason}");
            let source = source.as_ref().unwrap();
            assert!(source.to_string().contains("simulated I/O failure"), "{source}");
        }
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    assert!(std::error::Error::source(&err).is_some(), "the I/O error is the source");
    // Its bytes had reached the file: the process dies, and the reopened store holds the batch.
    let disk = disk.process_crash();
    drop(store);
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    assert_eq!(check_prefix(&store, 0, 2, 2), 2);
}

#[test]
fn an_append_whose_group_write_failed_says_its_outcome_is_unknown() {
    // A write that fails may have put part of the group (or all of it) on disk.
    let disk = SimDisk::new();
    let store = open_sim(&disk, exact()).unwrap();
    append_one(&store, 0).unwrap();
    disk.fail_next(OpKind::Write);
    let err = append_one(&store, 1).unwrap_err();
    assert!(matches!(&err, AppendError::OutcomeUnknown { source: Some(_), .. }), "{err:?}");
    assert!(err.to_string().contains("writing"), "{err}");
    assert!(append_one(&store, 1).unwrap_err().is_poisoned());
    drop(store);
    let store = open_sim(&disk.process_crash(), exact()).unwrap();
    check_prefix(&store, 0, 1, 2);
}

#[test]
fn a_failure_before_the_group_is_written_is_a_plain_io_error() {
    // Extending the segment with zeros comes before the group's write: nothing of the batch
    // can have landed.
    let disk = SimDisk::new();
    let store = open_sim(&disk, FileOptions::new()).unwrap();
    disk.fail_next(OpKind::Write);
    let err = append_one(&store, 0).unwrap_err();
    assert!(matches!(err, AppendError::Store(StoreError::Io { .. })), "{err:?}");
    assert!(err.to_string().contains("zeros"), "{err}");
    drop(store);
    let store = open_sim(&disk.process_crash(), FileOptions::new()).unwrap();
    assert_eq!(check_prefix(&store, 0, 0, 0), 0);
}

#[test]
fn the_writer_reports_an_unknown_outcome_when_the_poisoned_store_cannot_tell_it() {
    // After OutcomeUnknown the writer reads the session to learn whether the batch landed; a
    // poisoned file store refuses the read, and the writer used to report that refusal instead
    // of the unknown outcome.
    use stepjournal::recovery::MemoryRegistry;
    use stepjournal::writer::{Journal, JournalOptions};
    use stepjournal::{AfterFailure, BeginError, WriteError};
    use stepjournal::{Reply, Run};
    use stepjournal_codec::{Call, CallKind, Entry, Event, RawJson, Replay};

    let open = |disk: &SimDisk| -> Journal {
        // Without zeros ahead of the data, the first sync after a write is the group's own.
        let store = std::sync::Arc::new(open_sim(disk, exact()).unwrap());
        let registry = MemoryRegistry::new().with_tool("t", Replay::Safe);
        Journal::new(store, std::sync::Arc::new(registry), JournalOptions::new()).unwrap()
    };
    let s = crash_session(0);
    let disk = SimDisk::new();
    let journal = open(&disk);
    disk.fail_next(OpKind::SyncData);
    let err = journal.begin_run(&s, Entry::NewTurn { message: "hi".into() }).unwrap_err();
    assert!(
        matches!(err, BeginError::Append { source: AppendError::OutcomeUnknown { .. }, .. }),
        "{err:?}"
    );
    // Reopened, the journal holds the run it could not confirm; the next run's reply meets a
    // failed fdatasync too.
    drop(journal);
    let disk = disk.process_crash();
    let journal = open(&disk);
    let run: Run = journal.begin_run(&s, Entry::Wake).unwrap();
    disk.fail_next(OpKind::SyncData);
    let call = Call {
        call: "c1".into(),
        tool: "t".into(),
        args: RawJson::parse("{}").unwrap(),
        kind: CallKind::Tool,
        replay: Replay::Safe,
        group: None,
        sequential: false,
    };
    let err = run.commit_reply(Reply::new("").call(call)).unwrap_err();
    assert!(
        matches!(
            err,
            WriteError::Store {
                source: AppendError::OutcomeUnknown { .. },
                then: AfterFailure::Unwritable,
                ..
            }
        ),
        "{err:?}"
    );
    drop((run, journal));
    let store = open_sim(&disk.process_crash(), exact()).unwrap();
    let log = store.read_all(&s).unwrap();
    assert!(log.iter().any(|r| matches!(r.event, Event::ReplyCommitted(_))), "it had landed");
}

/// What the gated workload of [`committer_rounds`] attempted and had acknowledged, per session.
#[derive(Debug, Default, Clone)]
struct Gated {
    attempted: Vec<u64>,
    acked: Vec<u64>,
    /// Events whose acknowledgement promised a power loss keeps them (a synced append, and
    /// every append acknowledged before one).
    durable: Vec<u64>,
}

impl Gated {
    fn new(n: usize) -> Gated {
        Gated { attempted: vec![0; n], acked: vec![0; n], durable: vec![0; n] }
    }
}

/// Rounds of one sync appender leading a group whose sync is held at the gate, `followers`
/// async appends queued behind it, then the gate opened: the committer thread writes the
/// followers as the next group. The operations come in the same order on every run. Stops at
/// the first error.
fn committer_rounds(disk: &SimDisk, store: &FileStore, rounds: u64, followers: usize) -> Gated {
    let n = followers + 1;
    let mut model = Gated::new(n);
    let poisoned = || store.metrics().poisoned == 1;
    for round in 0..rounds {
        let sync = round % 3 != 2;
        let d = if sync { Durability::Synced } else { Durability::Buffered };
        disk.hold_syncs();
        let ok = std::thread::scope(|scope| {
            let leader = scope.spawn(|| {
                let e = [Stamped::at(UnixMillis(round), crash_event(0, round))];
                store.append(&crash_session(0), Seq(round), &e, Durability::Synced)
            });
            // The leader's sync is held, or it failed (the power is out).
            while disk.held_syncs() == 0 && !leader.is_finished() {
                std::thread::yield_now();
            }
            let futures: Vec<_> = (1..n)
                .map(|s| {
                    let e = [Stamped::at(UnixMillis(round), crash_event(s, round))];
                    store.append_async(&crash_session(s), Seq(round), &e, d)
                })
                .collect();
            while store.queued() < followers && !poisoned() && !leader.is_finished() {
                std::thread::yield_now();
            }
            disk.release_syncs();
            let mut ok = true;
            for (s, r) in std::iter::once(leader.join().unwrap())
                .chain(futures.into_iter().map(|f| f.wait()))
                .enumerate()
            {
                model.attempted[s] = round + 1;
                match r {
                    Ok(ack) => {
                        assert_eq!(ack.next, Seq(round + 1));
                        model.acked[s] = round + 1;
                        // The leader's appends are synced; the followers' are synced in two
                        // rounds of three.
                        if s == 0 || sync {
                            model.durable.clone_from(&model.acked);
                        }
                    }
                    Err(e) => {
                        assert!(!matches!(e, AppendError::Conflict { .. }), "{e}");
                        ok = false;
                    }
                }
            }
            ok
        });
        if !ok {
            break;
        }
    }
    model
}

#[test]
fn a_crash_at_every_write_and_sync_of_committer_groups_keeps_every_acknowledged_append() {
    // The committer thread writes the groups async appenders queue behind a sync caller's; a
    // power loss at any of its writes and syncs keeps every append acknowledged as synced, and
    // every buffered one acknowledged before a synced one.
    const ROUNDS: u64 = 8;
    const FOLLOWERS: usize = 3;
    let _watchdog = stepjournal_tests::watchdog::Watchdog::start(
        "the gated committer rounds",
        std::time::Duration::from_secs(300),
    );
    let total = {
        let disk = SimDisk::new();
        let store = open_sim(&disk, options()).unwrap();
        let model = committer_rounds(&disk, &store, ROUNDS, FOLLOWERS);
        assert!(model.acked.iter().all(|a| *a == ROUNDS), "{model:?}");
        let groups = store.stats().groups;
        assert_eq!(groups, 2 * ROUNDS, "each round: the leader's group, then the followers'");
        disk.ops()
    };
    let fates: [(&str, PowerLoss); 2] = [
        ("lose unsynced", SimDisk::crash_lose_unsynced),
        ("keep written", SimDisk::crash_keep_written),
    ];
    for n in 0..=total {
        for (what, crash) in fates {
            let disk = SimDisk::new();
            disk.crash_at_op(n);
            let model = match open_sim(&disk, options()) {
                Ok(store) => committer_rounds(&disk, &store, ROUNDS, FOLLOWERS),
                Err(_) => Gated::new(FOLLOWERS + 1),
            };
            let after = crash(&disk);
            let store = open_sim(&after, options())
                .unwrap_or_else(|e| panic!("crash at op {n} ({what}): reopening failed: {e}"));
            for s in 0..=FOLLOWERS {
                check_prefix(&store, s, model.durable[s], model.attempted[s]);
            }
        }
    }
}

mod compaction {
    //! A crash at every operation of a compaction (its copies' writes, its `fdatasync`, the old
    //! segment's removal and the directory's sync), under each way the power can go: every
    //! acknowledged event survives, a deleted session stays deleted, and once reopened the
    //! journal compacts and reads as before.

    use super::*;

    /// Session 0 is kept; sessions 1.. are written between its batches and deleted.
    const TEMPS: usize = 3;

    fn opts() -> FileOptions {
        FileOptions::new().segment_size(8192).compact_when_dead(50)
    }

    /// Fills two sealed segments with the kept session's batches between the others' (each
    /// append synced, the reclaim thread waited for after each). Returns the kept session's
    /// length and each other session's.
    fn fill(store: &FileStore) -> (u64, Vec<u64>) {
        let mut kept = 0;
        let mut temps = vec![0u64; TEMPS];
        let mut k = 0usize;
        while store.index_size().segments < 3 {
            let (s, at) = if k.is_multiple_of(TEMPS + 1) {
                (0, &mut kept)
            } else {
                let t = k % (TEMPS + 1);
                (t, &mut temps[t - 1])
            };
            let events: Vec<Stamped> =
                (*at..*at + 2).map(|q| Stamped::at(UnixMillis(q), crash_event(s, q))).collect();
            store.append(&crash_session(s), Seq(*at), &events, Durability::Synced).unwrap();
            *at += 2;
            store.wait_reclaimed();
            k += 1;
        }
        (kept, temps)
    }

    /// Deletes the other sessions, then waits for the reclaim thread; returns how many
    /// deletions were acknowledged before the first failure.
    fn delete_and_compact(store: &FileStore) -> usize {
        for t in 1..=TEMPS {
            if store.delete(&crash_session(t)).is_err() {
                return t - 1;
            }
            store.wait_reclaimed();
            if store.heads().is_err() {
                return t;
            }
        }
        TEMPS
    }

    fn first_segment() -> std::path::PathBuf {
        sim_dir().join(stepjournal_backends::file::SegmentId(1).file_name())
    }

    #[test]
    fn a_crash_at_every_operation_of_a_compaction_keeps_what_was_promised() {
        // The run without a crash: where the compaction's operations lie, and that it happens.
        let disk = SimDisk::new();
        let store = open_sim(&disk, opts()).unwrap();
        let (kept, temps) = fill(&store);
        let from = disk.ops();
        disk.record_ops();
        assert_eq!(delete_and_compact(&store), TEMPS);
        let total = disk.ops();
        let log = disk.op_log();
        assert!(disk.read_file(&first_segment()).is_none(), "the first segment was compacted away");
        let removes = log.iter().filter(|(k, _)| *k == OpKind::Remove).count();
        let writes = log.iter().filter(|(k, _)| *k == OpKind::Write).count();
        assert!(removes >= 2 && writes > TEMPS, "{log:?}");
        assert_eq!(check_prefix(&store, 0, kept, kept), kept);
        drop(store);

        type PowerLoss = fn(&SimDisk) -> SimDisk;
        let fates: [(&str, PowerLoss); 3] = [
            ("lose unsynced", SimDisk::crash_lose_unsynced),
            ("keep written", SimDisk::crash_keep_written),
            ("tear every unsynced write in half", |d| {
                d.crash(|op| match op {
                    stepjournal_backends::file::sim::PendingOp::Write { len, .. } => {
                        Fate::Tear(len / 2)
                    }
                    _ => Fate::Keep,
                })
            }),
        ];
        for n in from..=total {
            for (what, crash) in fates {
                let disk = SimDisk::new();
                let store = open_sim(&disk, opts()).unwrap();
                assert_eq!(fill(&store), (kept, temps.clone()));
                assert_eq!(disk.ops(), from, "the same operations on every run");
                disk.crash_at_op(n);
                let deleted = delete_and_compact(&store);
                assert_eq!(deleted == TEMPS, n == total, "op {n} ({what})");
                drop(store);
                let after = crash(&disk);
                let store = open_sim(&after, opts())
                    .unwrap_or_else(|e| panic!("crash at op {n} ({what}): reopening failed: {e}"));
                assert_eq!(check_prefix(&store, 0, kept, kept), kept, "op {n} ({what})");
                for t in 1..=TEMPS {
                    let len = check_prefix(&store, t, 0, temps[t - 1]);
                    if t <= deleted {
                        assert_eq!(len, 0, "op {n} ({what}): session {t} came back");
                    } else {
                        assert!(len == 0 || len == temps[t - 1], "op {n} ({what}): {len}");
                    }
                }
                // The reopened store finishes the work, and holds the same after another open.
                for t in 1..=TEMPS {
                    store.delete(&crash_session(t)).unwrap();
                }
                store.wait_reclaimed();
                assert!(store.heads().is_ok(), "op {n} ({what})");
                drop(store);
                let store = open_sim(&after, opts()).unwrap();
                assert!(after.read_file(&first_segment()).is_none(), "op {n} ({what})");
                assert_eq!(check_prefix(&store, 0, kept, kept), kept, "op {n} ({what})");
                assert_eq!(store.sessions().unwrap(), vec![crash_session(0)], "op {n} ({what})");
            }
        }
    }
}

mod sidecar {
    //! A crash at every operation of writing a sealed segment's sidecar index (its creation,
    //! write, `fdatasync` and the directory's sync), under each way the power can go: the journal
    //! opens with every acknowledged event, whether the sidecar survived whole, in part or not at
    //! all, and a writable open has it written again.

    use super::*;

    fn opts() -> FileOptions {
        // Single-event groups make a segment a quarter headers: kept below compaction's bar,
        // so that the reclaim thread's only work is the sidecar.
        FileOptions::new().segment_size(8192).compact_when_dead(50)
    }

    /// Synced appends of session 0 until the first segment is sealed; returns how many events.
    fn until_sealed(store: &FileStore) -> u64 {
        let mut q = 0;
        while store.index_size().segments < 2 {
            append_one(store, q).unwrap();
            q += 1;
        }
        q
    }

    fn sidecar_path() -> std::path::PathBuf {
        sim_dir().join(stepjournal_backends::file::SegmentId(1).file_name()).with_extension("idx")
    }

    /// A journal whose first segment is sealed and has no sidecar yet (the state the reclaim
    /// thread writes one in), and how many events it holds. Made once, appends and reclaim
    /// done, then the sidecar removed: the crash runs below open it with nothing else going
    /// on, so the operations after the open are the reclaim thread's alone, in the same order
    /// on every run.
    fn sealed_without_sidecar() -> (SimDisk, u64) {
        use stepjournal_backends::file::io::Io;
        let disk = SimDisk::new();
        let store = open_sim(&disk, opts()).unwrap();
        let kept = until_sealed(&store);
        store.wait_reclaimed();
        drop(store);
        disk.remove(&sidecar_path()).unwrap();
        disk.sync_dir(&sim_dir()).unwrap();
        (disk.crash_lose_unsynced(), kept)
    }

    #[test]
    fn a_crash_at_every_operation_of_a_sidecar_write_keeps_what_was_promised() {
        // Regression: the crash points were counted from a run that appended while the reclaim
        // thread wrote the sidecar, so under load a crash point fell on an append instead (24 of
        // 120 runs failed with two copies of the test at once). The sidecar is now written by a
        // reopened store that appends nothing.
        let (base, kept) = sealed_without_sidecar();
        // The run without a crash: where the sidecar's operations lie.
        let disk = base.crash_keep_written();
        disk.record_ops();
        let store = open_sim(&disk, opts()).unwrap();
        store.wait_reclaimed();
        let log = disk.op_log();
        let idx = |p: &std::path::Path| p.extension().is_some_and(|e| e == "idx");
        let first = log.iter().position(|(_, p)| idx(p)).expect("a sidecar was written");
        let kinds: Vec<OpKind> = log[first..].iter().map(|(k, _)| *k).collect();
        assert_eq!(
            kinds,
            [OpKind::Create, OpKind::Write, OpKind::SyncData, OpKind::SyncDir],
            "{log:?}"
        );
        assert!(disk.read_file(&sidecar_path()).is_some(), "the sealed segment has its sidecar");
        drop(store);
        let (from, total) = (first as u64, log.len() as u64);
        type PowerLoss = fn(&SimDisk) -> SimDisk;
        let fates: [(&str, PowerLoss); 3] = [
            ("lose unsynced", SimDisk::crash_lose_unsynced),
            ("keep written", SimDisk::crash_keep_written),
            ("tear every unsynced write in half", |d| {
                d.crash(|op| match op {
                    stepjournal_backends::file::sim::PendingOp::Write { len, .. } => {
                        Fate::Tear(len / 2)
                    }
                    _ => Fate::Keep,
                })
            }),
        ];
        for n in from..total {
            for (what, crash) in fates {
                let disk = base.crash_keep_written();
                // Set before the open: the reclaim thread may begin as soon as it returns.
                disk.crash_at_op(disk.ops() + n);
                let store = open_sim(&disk, opts()).unwrap();
                store.wait_reclaimed();
                // A sidecar is off the append path: its failure is reported, never poisoning.
                assert!(store.stats().reclaim_failures >= 1, "op {n} ({what}): not reported");
                assert!(store.heads().is_ok(), "op {n} ({what}): a sidecar's failure poisoned");
                drop(store);
                let after = crash(&disk);
                for read_only in [true, false] {
                    let store = open_sim(&after, opts().read_only(read_only))
                        .unwrap_or_else(|e| panic!("op {n} ({what}): reopening failed: {e}"));
                    assert_eq!(check_prefix(&store, 0, kept, kept), kept, "op {n} ({what})");
                    store.wait_reclaimed();
                }
                let store = open_sim(&after, opts()).unwrap();
                assert_eq!(check_prefix(&store, 0, kept, kept), kept, "op {n} ({what})");
                store.wait_reclaimed();
                drop(store);
                assert!(after.read_file(&sidecar_path()).is_some(), "op {n} ({what}): rewritten");
                let store = open_sim(&after, opts().read_only(true)).unwrap();
                assert_eq!(check_prefix(&store, 0, kept, kept), kept, "op {n} ({what})");
            }
        }
    }
}
