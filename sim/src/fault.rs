//! A simulation's case: the faults to inject, where, and how the session is entered after each.

use stepjournal_recovery::Config;

/// What one simulation does to the session: the faults, in order, and the settings.
///
/// Faults are armed one at a time: the first from the start, each next one once the previous
/// fired and the session was entered again. A fault whose point the session never reaches (it
/// ended first) does not fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// The faults, in the order they are armed.
    pub faults: Vec<Fault>,
    /// Recovery's settings (`max_bodies`).
    pub config: Config,
    /// Whether a step with client or undecided approval calls suspends the run to wait for
    /// their answers (a later `wake` gives them), instead of answering them at once.
    pub suspend: bool,
    /// Whether the answers to a suspended step land in the reverse of reply order (the last
    /// awaited call's first), instead of in reply order.
    pub reverse_answers: bool,
}

impl Case {
    /// No faults, `max_bodies` 3, client calls and approvals answered at once.
    pub fn new() -> Self {
        Case {
            faults: Vec::new(),
            config: Config::default(),
            suspend: false,
            reverse_answers: false,
        }
    }

    /// The case with one more fault.
    pub fn fault(mut self, fault: Fault) -> Self {
        self.faults.push(fault);
        self
    }

    /// The case with these recovery settings.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// The case suspending for client calls and approvals.
    pub fn suspending(mut self) -> Self {
        self.suspend = true;
        self
    }

    /// The case whose answers to a suspended step land last call first.
    pub fn answering_in_reverse(mut self) -> Self {
        self.reverse_answers = true;
        self
    }
}

impl Default for Case {
    fn default() -> Self {
        Self::new()
    }
}

/// One fault: where it fires, what follows it, and the seed the medium's crash draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// Where it fires and what it is.
    pub trigger: Trigger,
    /// The entry the session is entered through afterwards.
    pub then: Reentry,
    /// Decides what the medium keeps of unsynced writes in a crash (a simulated disk's torn,
    /// dropped and reordered writes), and where inside an append a torn landing cuts.
    pub seed: u64,
}

impl Fault {
    /// A crash at the `n`-th append (from 0) after the fault is armed; the batch lands or not.
    pub fn crash_at_append(n: u32, landing: Landing) -> Self {
        Fault::new(Trigger::Append { n, fault: AppendFault::Crash(landing) })
    }

    /// A crash inside the `n`-th body (from 0) started after the fault is armed, after its
    /// `point`-th action (0: before the tool runs; past its last action: just before its
    /// result).
    pub fn crash_in_body(n: u32, point: u32) -> Self {
        Fault::new(Trigger::Body { n, point, fault: BodyFault::Crash })
    }

    /// A fault with this trigger, followed by a `wake`, seed 0.
    pub fn new(trigger: Trigger) -> Self {
        Fault { trigger, then: Reentry::Wake, seed: 0 }
    }

    /// The fault followed by `entry`.
    pub fn then(mut self, entry: Reentry) -> Self {
        self.then = entry;
        self
    }

    /// The fault with this seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
}

/// Where a fault fires, and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// At the `n`-th append (from 0) any writer makes after the fault is armed.
    Append {
        /// Which append.
        n: u32,
        /// What happens to it.
        fault: AppendFault,
    },
    /// Inside the `n`-th body (from 0) started or re-attached to (a remote sub-agent's child,
    /// whose tool runs again) after the fault is armed, after its
    /// `point`-th action (0: before the tool runs; past its last action: just before its result).
    Body {
        /// Which body.
        n: u32,
        /// Where in it.
        point: u32,
        /// What happens.
        fault: BodyFault,
    },
}

/// A fault at an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendFault {
    /// The process dies during the append: every handle is dropped, the medium crashes, and the
    /// store is opened again.
    Crash(Landing),
    /// The store fails the append (nothing lands). Not poisoned: the store accepts the writer's
    /// failure path (the run pairs its open calls and ends `failed`). Poisoned: every later call
    /// fails until the store is opened again.
    Fail {
        /// Whether the store is poisoned by it.
        poisoned: bool,
    },
}

/// What lands of the append a crash interrupts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landing {
    /// The batch landed; the process died before it was acknowledged.
    Lands,
    /// The batch never reached the store.
    Lost,
    /// The medium itself crashes part-way through the append (a simulated disk loses power
    /// between its writes and syncs); what survives is the medium's to decide. Media that cannot
    /// do this treat it as [`Landing::Lost`].
    Torn,
}

/// A fault inside a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFault {
    /// The process dies with the body.
    Crash,
    /// The runtime loses the run (a worker whose lease expired, a partition): the session is
    /// entered again through the same store while the body keeps running. Once the newer entry
    /// has landed, the body performs its effect (if it had not) and tries to write its output
    /// and result: both must be refused (`Fenced`) and never reach the journal.
    Abandon,
    /// The runtime gives the body up and ends the run `failed` (`Run::fail`): its open calls are
    /// paired, and a `retry` can rewind them.
    FailRun,
}

/// The entry a session is entered through after a fault (the simulator makes the
/// [`Entry`](stepjournal_codec::Entry) from it, with what the session holds then). Named apart
/// from the `recovery` crate that plans the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reentry {
    /// `wake`.
    Wake,
    /// `resume` `continue`.
    Continue,
    /// `resume` `from_checkpoint` at the saved step's append checkpoint (the last commit's
    /// checkpoint when there is no saved step; `wake` when there is neither).
    FromCheckpoint,
    /// `retry` with nothing: refused unless the last run failed, and then a `wake` is made.
    Retry,
    /// `retry` with a message: a redirect.
    RetryWithMessage,
    /// `retry` with a message from the saved step's append checkpoint (the last commit's when
    /// there is no saved step; none when there is neither): a redirect.
    RetryFromCheckpoint,
    /// `resume` `with_message`: a redirect.
    WithMessage,
    /// `new_turn`: a redirect.
    NewTurn,
    /// `stop`: the session's work ends.
    Stop,
}

impl Reentry {
    /// Every entry.
    pub const ALL: [Reentry; 9] = [
        Reentry::Wake,
        Reentry::Continue,
        Reentry::FromCheckpoint,
        Reentry::Retry,
        Reentry::RetryWithMessage,
        Reentry::RetryFromCheckpoint,
        Reentry::WithMessage,
        Reentry::NewTurn,
        Reentry::Stop,
    ];
}
