//! Operation sequences on the file backend over the simulated disk, with I/O failures, power
//! losses (unsynced writes kept, dropped, torn or reordered) and process crashes, checked against
//! a model of what each acknowledgement promised.
//!
//! The model keeps, per session, the events attempted (whose outcome may be unknown), those
//! acknowledged, and those whose acknowledgement promised survival of a power loss (a synced
//! append or a deletion, and everything acknowledged before one). Events carry their session,
//! the session's incarnation (a deletion starts a new one) and their sequence number, so an event
//! in the wrong place, or one a deletion removed, is recognised. After every reopen each session
//! must be a dense prefix of what was attempted holding at least what was promised: everything
//! acknowledged after a clean close or a process crash, everything durable after a power loss.

use std::sync::Arc;

use arbitrary::{Arbitrary, Unstructured};
use stepjournal_backends::file::sim::{Fate, OpKind, PendingOp, SimDisk};
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::{AppendError, Durability, JournalStore, StoreError};
use stepjournal_codec::{Event, Message, Role, Seq, SessionId, Stamped, UnixMillis};

use super::ensure;

/// Sessions the operations name.
const SESSIONS: usize = 3;
/// The most operations one input runs.
const MAX_OPS: usize = 64;
/// How many times opening is tried after a restart: each failed try uses up one injected fault,
/// and each operation injects at most one.
const OPEN_TRIES: usize = MAX_OPS + 4;

/// Operations to run on a fresh journal, and how it is configured.
#[derive(Debug, Clone, Arbitrary)]
pub struct FileOpsInput {
    /// Segment size: 4 KiB times 1 to 4.
    pub segment: u8,
    /// Whether the writer puts zeros ahead of its data.
    pub preallocate: bool,
    /// The operations, in order.
    pub ops: Vec<FileOp>,
}

impl FileOpsInput {
    /// The input the `file_ops` target decodes from `data` (None when `data` is too short).
    pub fn from_bytes(data: &[u8]) -> Option<FileOpsInput> {
        FileOpsInput::arbitrary_take_rest(Unstructured::new(data)).ok()
    }
}

/// One operation.
#[derive(Debug, Clone, Arbitrary)]
pub enum FileOp {
    /// Appends 1 to 4 events of `size * 16` bytes of text each at the session's tail.
    Append {
        /// Session `s{session % 3}`.
        session: u8,
        /// Events: `1 + events % 4`.
        events: u8,
        /// Padding of each event, in 16-byte units.
        size: u8,
        /// `Synced` or `Buffered`.
        synced: bool,
    },
    /// Deletes the session.
    Delete {
        /// Session `s{session % 3}`.
        session: u8,
    },
    /// Reads part of the session and its tail.
    Read {
        /// Session `s{session % 3}`.
        session: u8,
        /// First seq, `from % 8`.
        from: u8,
        /// How many, `len % 8`.
        len: u8,
    },
    /// Fails the next disk operation of a kind (`kind % 7` < 6), or the one `after % 16`
    /// operations from now.
    Fail {
        /// Which kind, or 6: by count.
        kind: u8,
        /// Operations from now, for a failure by count.
        after: u8,
    },
    /// Loses power `after % 16` operations from now (the disk is recovered at the next restart).
    PowerAt {
        /// Operations from now.
        after: u8,
    },
    /// Closes the store and opens it again.
    Reopen,
    /// The process dies: written data stays, unsynced data is still unsynced.
    ProcessCrash,
    /// The power goes out now; each unsynced operation is kept, dropped or torn as `fates` says,
    /// in the order issued or (with `reorder`) another.
    PowerLoss {
        /// Per pending operation, cycling: `b % 3` 0 keep, 1 drop, 2 tear at `(b / 3) / 85` of
        /// the write. Empty: everything unsynced is lost.
        fates: Vec<u8>,
        /// Whether surviving operations land in another order.
        reorder: bool,
    },
}

/// One incarnation of a session: from its creation (or a deletion) on.
#[derive(Debug, Clone, Default)]
struct Incarnation {
    id: u32,
    /// The padding of every event attempted, by seq.
    pads: Vec<u16>,
    acked: u64,
    durable: u64,
}

#[derive(Debug, Default)]
struct SessionModel {
    cur: Incarnation,
    /// The incarnation before a deletion whose outcome is unknown.
    before_delete: Option<Incarnation>,
    next_id: u32,
}

impl SessionModel {
    fn fresh(&mut self) -> Incarnation {
        self.next_id += 1;
        Incarnation { id: self.next_id, ..Incarnation::default() }
    }
}

#[derive(Debug)]
enum Restart {
    Clean,
    Process,
    Power { fates: Vec<u8>, reorder: bool },
}

struct Harness {
    disk: SimDisk,
    store: Option<FileStore>,
    options: FileOptions,
    sessions: Vec<SessionModel>,
    /// A mutating call failed: the store must refuse everything until reopened.
    poisoned: bool,
}

fn session(s: usize) -> SessionId {
    SessionId::from_stored(format!("s{s}"))
}

fn event(s: usize, inc: u32, seq: u64, pad: u16) -> Event {
    let pad = "x".repeat(usize::from(pad));
    Message { role: Role::User, text: format!("s{s}/{inc}/{seq}/{pad}") }.into()
}

/// Whether an error comes from a fault the harness injected (or a store poisoned by one).
fn injected(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if err.to_string().contains("simulated") {
            return true;
        }
        next = err.source();
    }
    false
}

fn open(
    disk: &SimDisk,
    options: FileOptions,
) -> Result<FileStore, stepjournal_backends::OpenError> {
    FileStore::open_with(Arc::new(disk.clone()), std::path::Path::new("/fuzz/ops"), options)
}

fn power_loss(disk: &SimDisk, fates: &[u8], reorder: bool) -> SimDisk {
    let mut i = 0usize;
    let fate = |op: PendingOp<'_>| {
        let b = if fates.is_empty() { 1 } else { fates.get(i % fates.len()).copied().unwrap_or(1) };
        i += 1;
        match b % 3 {
            0 => Fate::Keep,
            1 => Fate::Drop,
            _ => match op {
                PendingOp::Write { len, .. } => Fate::Tear(len * usize::from(b / 3) / 85),
                _ => Fate::Keep,
            },
        }
    };
    let order = |n: usize| {
        let mut order: Vec<usize> = (0..n).collect();
        if reorder && !fates.is_empty() {
            order.sort_by_key(|k| fates.get((k * 7 + 3) % fates.len()).copied().unwrap_or(0));
        }
        order
    };
    disk.crash_in_order(fate, order)
}

impl Harness {
    fn store(&self) -> Result<&FileStore, String> {
        self.store.as_ref().ok_or_else(|| "no store is open".to_owned())
    }

    fn model(&mut self, s: usize) -> Result<&mut SessionModel, String> {
        self.sessions.get_mut(s).ok_or_else(|| format!("no session {s}"))
    }

    fn all_durable(&mut self) {
        for m in &mut self.sessions {
            m.cur.durable = m.cur.acked;
        }
    }

    /// Runs one operation, then waits for the store's reclaim thread (sidecar indexes, removals,
    /// compaction), so that its disk operations come between the harness's, in the same order on
    /// every run, and a fault injected for one lands there.
    fn step(&mut self, op: &FileOp) -> Result<(), String> {
        self.run(op)?;
        if let Some(store) = &self.store {
            store.wait_reclaimed();
        }
        Ok(())
    }

    fn run(&mut self, op: &FileOp) -> Result<(), String> {
        match op {
            FileOp::Append { session: s, events, size, synced } => {
                self.append(usize::from(*s) % SESSIONS, 1 + u64::from(*events % 4), *size, *synced)
            }
            FileOp::Delete { session: s } => self.delete(usize::from(*s) % SESSIONS),
            FileOp::Read { session: s, from, len } => {
                self.read(usize::from(*s) % SESSIONS, u64::from(from % 8), u64::from(len % 8))
            }
            FileOp::Fail { kind, after } => {
                let kinds = [
                    OpKind::Create,
                    OpKind::Write,
                    OpKind::SyncData,
                    OpKind::SetLen,
                    OpKind::Remove,
                    OpKind::SyncDir,
                ];
                match kinds.get(usize::from(kind % 7)) {
                    Some(k) => self.disk.fail_next(*k),
                    None => self.disk.fail_op(self.disk.ops() + u64::from(after % 16)),
                }
                Ok(())
            }
            FileOp::PowerAt { after } => {
                self.disk.crash_at_op(self.disk.ops() + u64::from(after % 16));
                Ok(())
            }
            FileOp::Reopen => self.restart(Restart::Clean),
            FileOp::ProcessCrash => self.restart(Restart::Process),
            FileOp::PowerLoss { fates, reorder } => {
                let fates = fates.iter().take(64).copied().collect();
                self.restart(Restart::Power { fates, reorder: *reorder })
            }
        }
    }

    fn append(&mut self, s: usize, n: u64, size: u8, synced: bool) -> Result<(), String> {
        let poisoned = self.poisoned;
        let pad = u16::from(size) * 16;
        let m = self.model(s)?;
        let from = m.cur.acked;
        let id = m.cur.id;
        let events: Vec<Stamped> =
            (from..from + n).map(|q| Stamped::at(UnixMillis(q), event(s, id, q, pad))).collect();
        let durability = if synced { Durability::Synced } else { Durability::Buffered };
        let result = self.store()?.append(&session(s), Seq(from), &events, durability);
        match result {
            Ok(ack) => {
                ensure!(!poisoned, "a store whose append failed acknowledged another");
                ensure!(
                    ack.first == Seq(from) && ack.next == Seq(from + n),
                    "acknowledged {ack:?} for {n} events at {from}"
                );
                let m = self.model(s)?;
                m.cur.pads.extend(std::iter::repeat_n(pad, n as usize));
                m.cur.acked = from + n;
                if synced {
                    self.all_durable();
                }
                Ok(())
            }
            Err(AppendError::Conflict { expected, actual }) => {
                Err(format!("conflict: the model's tail is {expected}, the store's {actual}"))
            }
            Err(e) => {
                ensure!(injected(&e) || poisoned, "an append failed with no fault injected: {e}");
                if !poisoned {
                    // The first failure: the batch may have landed.
                    self.model(s)?.cur.pads.extend(std::iter::repeat_n(pad, n as usize));
                    self.poisoned = true;
                }
                Ok(())
            }
        }
    }

    fn delete(&mut self, s: usize) -> Result<(), String> {
        let poisoned = self.poisoned;
        let result = self.store()?.delete(&session(s));
        let m = self.model(s)?;
        match result {
            Ok(existed) => {
                ensure!(!poisoned || !existed, "a store whose append failed deleted a session");
                ensure!(
                    poisoned || existed == (m.cur.acked > 0),
                    "delete says existed={existed} of a session with {} events",
                    m.cur.acked
                );
                if existed {
                    m.cur = m.fresh();
                    self.all_durable();
                }
                Ok(())
            }
            Err(e) => {
                ensure!(injected(&e) || poisoned, "a delete failed with no fault injected: {e}");
                if !poisoned {
                    let before = std::mem::take(&mut m.cur);
                    m.cur = m.fresh();
                    m.before_delete = Some(before);
                    self.poisoned = true;
                }
                Ok(())
            }
        }
    }

    fn read(&mut self, s: usize, from: u64, len: u64) -> Result<(), String> {
        let store = self.store()?;
        let (read, tail) =
            (store.read(&session(s), Seq(from)..Seq(from + len)), store.tail(&session(s)));
        let (read, tail) = match (read, tail) {
            (Ok(r), Ok(t)) => (r, t),
            (Err(e), _) | (_, Err(e)) => {
                // A failure the caller never saw (freeing space after an acknowledged deletion)
                // may have poisoned the store; the power may be out.
                ensure!(
                    injected(&e) || matches!(e, StoreError::Poisoned { .. }),
                    "a read failed with no fault injected: {e}"
                );
                self.poisoned = true;
                return Ok(());
            }
        };
        ensure!(!self.poisoned, "a store whose append failed served a read");
        let m = self.model(s)?;
        ensure!(tail == Seq(m.cur.acked), "tail {tail}, the model says {}", m.cur.acked);
        let end = (from + len).min(m.cur.acked);
        ensure!(
            read.len() as u64 == end.saturating_sub(from),
            "read {} events of {from}..{end}",
            read.len()
        );
        for (r, q) in read.iter().zip(from..) {
            let pad = m.cur.pads.get(q as usize).copied().unwrap_or(0);
            ensure!(
                r.seq == Seq(q) && r.event == event(s, m.cur.id, q, pad),
                "seq {q} of s{s} reads as {} {:?}",
                r.seq,
                r.event
            );
        }
        Ok(())
    }

    fn restart(&mut self, how: Restart) -> Result<(), String> {
        drop(self.store.take());
        let mut how = how;
        let mut power = false;
        let mut last = String::new();
        for _ in 0..OPEN_TRIES {
            if self.disk.is_crashed() && !matches!(how, Restart::Power { .. }) {
                how = Restart::Power { fates: Vec::new(), reorder: false };
            }
            match &how {
                Restart::Clean => {}
                Restart::Process => self.disk = self.disk.process_crash(),
                Restart::Power { fates, reorder } => {
                    power = true;
                    self.disk = power_loss(&self.disk, fates, *reorder);
                }
            }
            match open(&self.disk, self.options) {
                Ok(store) => {
                    // The reclaim thread's first pass (sidecar indexes the last run did not
                    // write, space to free) may meet a fault injected earlier: it poisons the
                    // store as a failed open would fail, and uses the fault up.
                    store.wait_reclaimed();
                    if let Err(e) = store.heads() {
                        ensure!(injected(&e), "a store poisoned with no fault injected: {e}");
                        last = e.to_string();
                        how = Restart::Clean;
                        continue;
                    }
                    self.store = Some(store);
                    return self.reconcile(power);
                }
                Err(e) => {
                    ensure!(injected(&e), "opening after {how:?} failed: {e}");
                    last = e.to_string();
                    how = Restart::Clean;
                }
            }
        }
        Err(format!("the journal did not open in {OPEN_TRIES} tries; the last: {last}"))
    }

    /// Checks every session against the model after a reopen, and adopts what is there (opening
    /// made it durable).
    fn reconcile(&mut self, power: bool) -> Result<(), String> {
        let mut observed = Vec::new();
        for s in 0..SESSIONS {
            let log =
                self.store()?.read_all(&session(s)).map_err(|e| format!("reading s{s}: {e}"))?;
            observed.push(log);
        }
        for (s, log) in observed.iter().enumerate() {
            let m = self.model(s)?;
            let mut why = Vec::new();
            let candidates = std::iter::once(&m.cur).chain(m.before_delete.as_ref());
            let mut found = None;
            for inc in candidates {
                match fits(s, inc, log, power) {
                    Ok(()) => {
                        found = Some(inc.clone());
                        break;
                    }
                    Err(e) => why.push(e),
                }
            }
            let Some(mut inc) = found else {
                return Err(format!(
                    "after {} s{s} holds {} events: {}",
                    if power { "a power loss" } else { "a restart" },
                    log.len(),
                    why.join("; ")
                ));
            };
            let len = log.len() as u64;
            inc.pads.truncate(len as usize);
            inc.acked = len;
            inc.durable = len;
            m.cur = inc;
            m.before_delete = None;
        }
        let listed = self.store()?.sessions().map_err(|e| format!("sessions(): {e}"))?;
        let expected: Vec<SessionId> = (0..SESSIONS)
            .filter(|s| observed.get(*s).is_some_and(|l| !l.is_empty()))
            .map(session)
            .collect();
        ensure!(
            listed == expected,
            "sessions() lists {listed:?}, the non-empty ones are {expected:?}"
        );
        self.poisoned = false;
        Ok(())
    }
}

/// Whether `log` is a dense prefix of incarnation `inc` of session `s`, holding at least what was
/// promised.
fn fits(
    s: usize,
    inc: &Incarnation,
    log: &[stepjournal_codec::Record],
    power: bool,
) -> Result<(), String> {
    let len = log.len() as u64;
    let promised = if power { inc.durable } else { inc.acked };
    let attempted = inc.pads.len() as u64;
    ensure!(
        (promised..=attempted).contains(&len),
        "incarnation {}: {len} events, but {promised} were promised and {attempted} attempted",
        inc.id
    );
    for (q, r) in log.iter().enumerate() {
        let pad = inc.pads.get(q).copied().unwrap_or(0);
        ensure!(
            r.seq == Seq(q as u64) && r.event == event(s, inc.id, q as u64, pad),
            "incarnation {}: seq {q} holds {} {:?}",
            inc.id,
            r.seq,
            r.event
        );
    }
    Ok(())
}

/// Runs the operations on a fresh journal, then closes it cleanly and loses power once more,
/// checking the model after every restart and every read.
pub fn check_file_ops(input: &FileOpsInput) -> Result<(), String> {
    let options = FileOptions::new()
        .segment_size(4096 * (1 + u64::from(input.segment % 4)))
        .preallocate(if input.preallocate { 4096 } else { 0 });
    let disk = SimDisk::new();
    let store = open(&disk, options).map_err(|e| format!("opening a fresh journal: {e}"))?;
    let mut h = Harness {
        disk,
        store: Some(store),
        options,
        sessions: (0..SESSIONS).map(|_| SessionModel::default()).collect(),
        poisoned: false,
    };
    for (i, op) in input.ops.iter().take(MAX_OPS).enumerate() {
        h.step(op).map_err(|e| format!("operation {i} ({op:?}): {e}"))?;
    }
    h.restart(Restart::Clean).map_err(|e| format!("the closing reopen: {e}"))?;
    h.restart(Restart::Power { fates: Vec::new(), reorder: false })
        .map_err(|e| format!("the closing power loss: {e}"))?;
    Ok(())
}
