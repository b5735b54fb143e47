//! What a simulated store lives on, and what a crash leaves of it.

use std::path::PathBuf;
use std::sync::Arc;

use stepjournal_backends::file::sim::{Fate, SimDisk};
use stepjournal_backends::file::{FileOptions, FileStore};
use stepjournal_backends::memory::MemoryStore;
use stepjournal_backends::{JournalStore, OpenError};

/// Called with the fault's seed just before an append a [`Landing::Torn`](super::Landing::Torn)
/// crash interrupts: arms the medium to fail part-way through it.
pub type TearHook = Arc<dyn Fn(u64) + Send + Sync>;

/// What the simulated store lives on: opened at the start, and again after every crash (on
/// what the crash left) and every poisoning.
///
/// The simulator drops every handle of the store before it calls [`crash`](Self::crash) or
/// [`open`](Self::open) again, as a dead process would have. Implement it for another backend
/// (a database file reopened after each crash, say) to run the simulator over it.
pub trait Medium {
    /// A short name for reports (`memory`, `file on a simulated disk`).
    fn name(&self) -> String;

    /// Opens the store on what the medium holds now.
    fn open(&mut self) -> Result<Arc<dyn JournalStore>, OpenError>;

    /// The simulated process died: the medium keeps what a crash of its kind keeps. `seed`
    /// chooses among the outcomes that kind of crash allows.
    fn crash(&mut self, seed: u64);

    /// A hook that makes the medium fail part-way through the next append, or `None` if it
    /// cannot (a torn landing is then a lost one). Asked once per [`open`](Self::open).
    fn tear_hook(&self) -> Option<TearHook> {
        None
    }
}

/// The memory store: it outlives the simulated process (a crash loses nothing), so only the
/// writer's side of a crash is exercised.
#[derive(Debug, Default)]
pub struct MemoryMedium {
    store: Arc<MemoryStore>,
}

impl MemoryMedium {
    /// An empty memory store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Medium for MemoryMedium {
    fn name(&self) -> String {
        "memory".to_owned()
    }

    fn open(&mut self) -> Result<Arc<dyn JournalStore>, OpenError> {
        Ok(self.store.clone())
    }

    fn crash(&mut self, _seed: u64) {}
}

/// The file backend on a [`SimDisk`]: a crash is a crash of the process (the operating system
/// keeps every write) or a loss of power (unsynced writes kept, dropped, torn or reordered, as
/// the seed draws); a torn landing loses power part-way through the append's writes and syncs.
#[derive(Debug)]
pub struct SimDiskMedium {
    disk: SimDisk,
    dir: PathBuf,
    options: FileOptions,
}

impl SimDiskMedium {
    /// A fresh simulated disk, the journal in `/journal`, 4 KiB segments (so that appends
    /// cross segment boundaries) and 8 KiB of preallocated zeros.
    pub fn new() -> Self {
        let options = FileOptions::new().segment_size(4096).preallocate(8192);
        SimDiskMedium { disk: SimDisk::new(), dir: PathBuf::from("/journal"), options }
    }

    /// The medium with these file options.
    pub fn options(mut self, options: FileOptions) -> Self {
        self.options = options;
        self
    }

    /// The disk as it is now.
    pub fn disk(&self) -> &SimDisk {
        &self.disk
    }
}

impl Default for SimDiskMedium {
    fn default() -> Self {
        Self::new()
    }
}

/// A small deterministic generator (xorshift) drawn from a fault's seed.
#[derive(Debug)]
pub(crate) struct Draw(u64);

impl Draw {
    pub(crate) fn new(seed: u64) -> Self {
        Draw(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

impl Medium for SimDiskMedium {
    fn name(&self) -> String {
        "file on a simulated disk".to_owned()
    }

    fn open(&mut self) -> Result<Arc<dyn JournalStore>, OpenError> {
        let store = FileStore::open_with(Arc::new(self.disk.clone()), &self.dir, self.options)?;
        Ok(Arc::new(store))
    }

    fn crash(&mut self, seed: u64) {
        let mut draw = Draw::new(seed);
        self.disk = if draw.below(3) == 0 {
            self.disk.process_crash()
        } else {
            let reorder = draw.below(2) == 0;
            let fate = |op: stepjournal_backends::file::sim::PendingOp<'_>| {
                let len = match op {
                    stepjournal_backends::file::sim::PendingOp::Write { len, .. } => len as u64,
                    _ => 1,
                };
                match draw.below(3) {
                    0 => Fate::Keep,
                    1 => Fate::Drop,
                    _ => Fate::Tear(usize::try_from(draw.below(len + 1)).unwrap_or(0)),
                }
            };
            let mut order_draw = Draw::new(seed ^ 0x5EED);
            self.disk.crash_in_order(fate, |n| {
                let mut order: Vec<usize> = (0..n).collect();
                if reorder {
                    for i in (1..n).rev() {
                        let j = usize::try_from(order_draw.below(i as u64 + 1)).unwrap_or(0);
                        order.swap(i, j);
                    }
                }
                order
            })
        };
    }

    fn tear_hook(&self) -> Option<TearHook> {
        let disk = self.disk.clone();
        // An append is a write and a sync (more across a segment boundary): the power goes out
        // before the write, between the write and the sync, or after the sync.
        Some(Arc::new(move |seed| disk.crash_at_op(disk.ops().saturating_add(seed % 3))))
    }
}
