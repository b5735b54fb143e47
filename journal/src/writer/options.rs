//! [`JournalOptions`]: the writer's settings, each with a documented default.

use std::sync::Arc;
use std::time::Duration;

use stepjournal_backends::{Durability, OwnerId};
use stepjournal_codec::Operator;
use stepjournal_recovery::Config;

use super::clock::{Clock, SystemClock};
use super::ids::{IdSource, UniqueIds};
use super::owner::default_owner;

/// The writer's settings. Build with [`JournalOptions::new`] (the defaults) and the setters.
///
/// | setting | default |
/// |---|---|
/// | [`durability`](Self::durability) | [`Durability::Synced`] (weakened to what the store gives) |
/// | [`recovery`](Self::recovery) | [`Config::default`]: `max_bodies` 3 |
/// | [`ids`](Self::ids) | [`UniqueIds::new`] |
/// | [`clock`](Self::clock) | [`SystemClock`]: the system's wall clock |
/// | [`begin_attempts`](Self::begin_attempts) | 16 |
/// | [`append_attempts`](Self::append_attempts) | 16 |
/// | [`owner`](Self::owner) | `host:pid:random` |
/// | [`lease_ttl`](Self::lease_ttl) | 30 s |
/// | [`lease_keeper`](Self::lease_keeper) | on: a thread keeps the leases |
/// | [`snapshot_every`](Self::snapshot_every) | 32 steps |
/// | [`snapshot_after_bytes`](Self::snapshot_after_bytes) | 1 MiB of text |
/// | [`operator`](Self::operator) | none: runs carry no operator |
/// | [`retain_ended_for`](Self::retain_ended_for) | off: sessions are kept until deleted |
/// | [`trim_after_runs`](Self::trim_after_runs) | off: a session keeps its whole history |
#[derive(Debug, Clone)]
pub struct JournalOptions {
    pub(crate) durability: Durability,
    pub(crate) config: Config,
    pub(crate) ids: Arc<dyn IdSource>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) begin_attempts: u32,
    pub(crate) append_attempts: u32,
    pub(crate) owner: OwnerId,
    pub(crate) lease_ttl: Duration,
    pub(crate) lease_keeper: bool,
    pub(crate) snapshot_every: u32,
    pub(crate) snapshot_after_bytes: u64,
    pub(crate) operator: Option<Operator>,
    pub(crate) retain_ended_for: Option<Duration>,
    pub(crate) trim_keep_turns: Option<usize>,
}

impl JournalOptions {
    /// The default number of read-fold-plan-append rounds a `begin_run` makes before it reports
    /// [`BeginError::Contended`](super::BeginError::Contended).
    pub const DEFAULT_BEGIN_ATTEMPTS: u32 = 16;
    /// The default number of compare-and-set rounds one append of a run makes, when other
    /// writers keep adding events that do not fence it, before it reports
    /// [`WriteError::Contended`](super::WriteError::Contended).
    pub const DEFAULT_APPEND_ATTEMPTS: u32 = 16;

    /// The default time a run's lease lasts unless renewed.
    pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

    /// The default number of committed steps between two snapshots.
    pub const DEFAULT_SNAPSHOT_EVERY: u32 = 32;

    /// The default bytes of text after the last snapshot that make a step commit carry one.
    pub const DEFAULT_SNAPSHOT_AFTER_BYTES: u64 = 1 << 20;

    /// The defaults (see the table above).
    pub fn new() -> Self {
        JournalOptions {
            durability: Durability::Synced,
            config: Config::default(),
            ids: Arc::new(UniqueIds::new()),
            clock: Arc::new(SystemClock),
            begin_attempts: Self::DEFAULT_BEGIN_ATTEMPTS,
            append_attempts: Self::DEFAULT_APPEND_ATTEMPTS,
            owner: default_owner(),
            lease_ttl: Self::DEFAULT_LEASE_TTL,
            lease_keeper: true,
            snapshot_every: Self::DEFAULT_SNAPSHOT_EVERY,
            snapshot_after_bytes: Self::DEFAULT_SNAPSHOT_AFTER_BYTES,
            operator: None,
            retain_ended_for: None,
            trim_keep_turns: None,
        }
    }

    /// The durability every append asks for. Default [`Durability::Synced`]: an `Ok` means the
    /// events are on stable storage. A store that gives less (the memory store) gives what it
    /// can; [`Durability::Buffered`] trades loss of power for speed.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Recovery's settings (`max_bodies`). Default [`Config::default`]: 3 bodies per call.
    pub fn recovery(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Where run, dispatch and checkpoint ids come from. Default [`UniqueIds::new`]; tests and
    /// simulators use one shared [`SequentialIds`](super::SequentialIds).
    pub fn ids(mut self, ids: Arc<dyn IdSource>) -> Self {
        self.ids = ids;
        self
    }

    /// Where the time each append is stamped with comes from (every event of a batch gets the
    /// same time; recovery never reads it, and no lease is judged by it: leases go by the
    /// store's clock). Default [`SystemClock`]; a
    /// [`FixedClock`](super::FixedClock) or a [`SteppingClock`](super::SteppingClock) makes the
    /// bytes a run writes the same every time (simulators, tests).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How many rounds a `begin_run` makes while the log keeps moving under it. Default 16; at
    /// least 1 (0 is taken as 1).
    pub fn begin_attempts(mut self, attempts: u32) -> Self {
        self.begin_attempts = attempts.max(1);
        self
    }

    /// How many compare-and-set rounds one append makes while other writers add events that do
    /// not fence the run. Default 16; at least 1 (0 is taken as 1).
    pub fn append_attempts(mut self, attempts: u32) -> Self {
        self.append_attempts = attempts.max(1);
        self
    }

    /// Who owns the runs this journal begins: the holder of their leases on a store several
    /// processes share. Default `host:pid:random`, different for every journal made; give each
    /// process its own.
    pub fn owner(mut self, owner: OwnerId) -> Self {
        self.owner = owner;
        self
    }

    /// How long a run's lease lasts unless renewed (the keeper renews every third of it).
    /// Default 30 s: a crashed process's runs are recoverable elsewhere that long after it
    /// died. At least 1 ms (0 is taken as 1 ms).
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl.max(Duration::from_millis(1));
        self
    }
}

impl JournalOptions {
    /// How many committed steps lie between two `snapshot`s a run writes: the step commit that
    /// makes `steps` since the last snapshot carries one in its batch, so an entry folds at
    /// most that many steps' events after the snapshot, however long the session (a run also
    /// writes one when asked, [`Run::snapshot`](super::Run::snapshot)). Default 32; 0 writes
    /// none by policy. A store writing record format version 2 (a rolling deploy whose readers
    /// do not all read version 3) cannot hold a snapshot: set 0 there.
    pub fn snapshot_every(mut self, steps: u32) -> Self {
        self.snapshot_every = steps;
        self
    }

    /// How many bytes of text (tool outputs and output chunks, replies and their calls'
    /// arguments, answers, messages: `SessionState::text_since_snapshot`) after the last
    /// snapshot make the next step commit carry one, whatever
    /// [`snapshot_every`](Self::snapshot_every) says: a few steps of large outputs make a long
    /// suffix too.
    /// Default 1 MiB; 0 weighs no bytes. The same version-2 caveat as `snapshot_every` holds.
    pub fn snapshot_after_bytes(mut self, bytes: u64) -> Self {
        self.snapshot_after_bytes = bytes;
        self
    }

    /// Whether the journal starts its lease keeper, a thread that renews the leases of its
    /// runs every third of [`lease_ttl`](Self::lease_ttl) and releases those of runs that
    /// ended (on stores that keep leases). Default on. Off, nothing renews or releases them
    /// but [`Journal::keep_leases`](super::Journal::keep_leases), called by the runtime from a
    /// timer of its own (or by a simulator, which decides when each actor acts): a lease not
    /// renewed in time lapses, and another runtime may recover the run.
    pub fn lease_keeper(mut self, on: bool) -> Self {
        self.lease_keeper = on;
        self
    }

    /// Who acts through this journal, and why (an operator's tool: the `stepjournal` command
    /// line's `--as` and `--reason`): every entry's batch carries it, on its `run_started`
    /// (`run_started.by`), or on the `run_ended` of a stop, which begins no run
    /// (`run_ended.by`); so do the wakes [`answer_client`](super::Journal::answer_client) and
    /// [`decide_approval`](super::Journal::decide_approval) begin.
    /// [`Journal::begin_run_as`](super::Journal::begin_run_as) names another for one entry.
    /// Default none: a runtime's own runs carry no operator. The member is format version 4: a
    /// store writing an older version refuses an entry that carries it
    /// ([`EncodeError::NotInVersion`](stepjournal_codec::EncodeError::NotInVersion)).
    pub fn operator(mut self, operator: Option<Operator>) -> Self {
        self.operator = operator;
        self
    }

    /// Trim policy: when a run that ended `completed` or `stopped` through
    /// [`Run::end`](super::Run::end) had a snapshot in its view, its session is trimmed keeping
    /// the last `keep_turns` turns whole, as [`Journal::trim`](super::Journal::trim) trims
    /// (never the newest snapshot alone, never what an open call needs). The end's future
    /// waits for it (a read of the session's kept log and one append); a trim that finds
    /// nothing to drop, or another actor's write in between, writes nothing, and a failed trim
    /// does not fail the end (the next end tries again). Default off: a session keeps its whole
    /// history until trimmed or deleted.
    pub fn trim_after_runs(mut self, keep_turns: usize) -> Self {
        self.trim_keep_turns = Some(keep_turns);
        self
    }

    /// Retention: the journal deletes, in a thread of its own, every session whose last run
    /// ended (`completed`, `failed` or `stopped`; never an open, crashed or suspended one)
    /// more than `age` ago, judged as [`Journal::retain`](super::Journal::retain) says, with a
    /// pass every tenth of `age` (at least every second, at most every ten minutes). Default
    /// off: sessions are kept until deleted (`stepjournal delete`, `JournalStore::delete`).
    pub fn retain_ended_for(mut self, age: Duration) -> Self {
        self.retain_ended_for = Some(age);
        self
    }
}

impl Default for JournalOptions {
    fn default() -> Self {
        Self::new()
    }
}
