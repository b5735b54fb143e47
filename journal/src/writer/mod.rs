//! The session writer: the API a runtime embeds, which makes the save-first protocol the only
//! path.
//!
//! ```text
//! Journal::begin_run(session, entry) ── run_started + the plan's appends, one CAS batch
//!   └─ Run ── plan(): each call of a recovered step with its action and rule
//!       ├─ step(): the recovered step, to act on the plan through
//!       ├─ commit_reply(reply) ── reply_committed + every dispatch_minted, durable
//!       │    └─ Step ── start_body(call) ── attempt_started, durable
//!       │         │       └─ Body ── output_chunk(text) … finish(output) ── tool_result
//!       │         ├─ approval / client_answer / child_attached / skip
//!       │         ├─ suspend(calls) ── suspended + run_ended suspended
//!       │         └─ commit() ── step_commit
//!       └─ end(outcome) / fail(error) ── run_ended
//! ```
//!
//! - **Save first, by construction**: a [`Body`] comes only from [`Step::start_body`], and a
//!   [`Step`] only from a reply whose batch has landed ([`Run::commit_reply`]) or from the saved
//!   step a recovered run holds ([`Run::step`]).
//! - **Fencing**: every append of a run is a compare-and-set at the tail the run last saw. When
//!   the events appended since hold a `run_started` or `run_ended` the run did not write (a
//!   newer run, a stop issued elsewhere), the append fails with [`WriteError::Fenced`] and
//!   writes nothing, so a late body's output and result never land. Other writers' events (a
//!   client answer written elsewhere) are folded and the append is retried at the new tail.
//! - **Store failure after the save**: when an append fails and the store still accepts writes,
//!   the run pairs each open call and ends `failed` (a `retry` recovers); when it does not, the
//!   run is broken (reopen the store; a `wake` recovers).
//!
//! - **Async, and sync as a wait on it**: every operation that appends has an async twin named
//!   with `_async` ([`Journal::begin_run_async`], [`Run::commit_reply_async`],
//!   [`Step::start_body_async`], [`Body::finish_async`], ...). There is one implementation, the
//!   async one, which awaits the store's completion-based path
//!   ([`JournalStore::append_async`](stepjournal_backends::JournalStore::append_async)); the sync
//!   method waits on it on the calling thread. The futures are `Send`, need no particular
//!   executor (nothing here names tokio), and a task waiting for a store's answer holds no
//!   thread. A run's appends are serialized by an async lock; reading its view ([`Run::status`],
//!   [`Run::with_state`]) never waits for an append. Call the sync API from threads, not from
//!   inside an async task: it blocks the thread it is called on.
//!
//! - **Several actors at once**: a run's future dropped while its batch was with the store (a
//!   timeout, a `select!`), a shutdown's deadline, a body past its deadline each let go of
//!   the run ([`RunStatus::Interrupted`]): it writes nothing more and a `wake` goes on from
//!   what landed, never a second attempt in one run, never a step committed over an open one.
//!   A write decided on what another actor may change is decided at the tail its actor read:
//!   a start-up's wake of a listed session, an answer or an approval, a stop that meets a run's
//!   own end (see [`Journal::recover_all`](crate::Journal::recover_all),
//!   [`Journal::answer_client`](crate::Journal::answer_client), [`Journal::stop`]). A process
//!   runs one journal per store ([`Journal::new`]). Every async method says what it leaves
//!   when its future is dropped.
//!
//! `docs/embedding.md` walks through a runtime's loop; `examples/agent_loop.rs` is one, compiled.

mod append;
pub(crate) mod body;
mod cancel;
mod claims;
mod clock;
pub(crate) mod error;
mod fork;
mod hub;
mod ids;
mod journal;
mod load;
mod options;
mod owner;
mod refuse;
mod retention;
mod run;
mod shared;
mod startup;
pub(crate) mod status;
mod step;
mod trace;
mod trim;
mod trim_journal;
mod wait;
mod yielding;

pub use body::Body;
pub(crate) use body::FinishError;
pub use cancel::{CancelSignal, Cancelled};
pub use clock::{Clock, FixedClock, SteppingClock, SystemClock};
pub(crate) use error::{AfterFailure, BeginError, JournalError, Refusal, WriteError};
pub use fork::ForkError;
pub use ids::{IdSource, SequentialIds, UniqueIds};
pub(crate) use journal::Begin;
pub use journal::Journal;
pub use options::JournalOptions;
pub use retention::Retained;
pub use run::{Reply, Run};
pub(crate) use startup::Wait;
pub use startup::{JournalMetrics, Shutdown};
pub(crate) use status::{Fence, Interruption, RunStatus};
pub use step::Step;
pub use trace::Span;
pub(crate) use trace::{in_span, step_span};
pub use trim::{Trim, TrimError};
pub use wait::block_on;
