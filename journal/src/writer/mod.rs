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
//! `docs/embedding.md` walks through a runtime's loop; `examples/agent_loop.rs` is one, compiled.

mod body;
mod clock;
mod error;
mod ids;
mod journal;
mod options;
mod refuse;
mod run;
mod shared;
mod step;

pub use body::Body;
pub use clock::{Clock, FixedClock, SteppingClock, SystemClock};
pub use error::{AfterFailure, BeginError, Fence, Order, Refusal, RunStatus, WriteError};
pub use ids::{IdSource, SequentialIds, UniqueIds};
pub use journal::Journal;
pub use options::JournalOptions;
pub use run::{Reply, Run};
pub use step::Step;
