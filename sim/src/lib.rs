//! stepjournal-sim: the crash simulator and the exhaustive explorer.
//!
//! The crash simulator property-tests a runtime's tools, and the journal under them, against
//! crashes. (FORMAT.md's recovery conformance scenarios are read, planned and checked by
//! `stepjournal::scenario`.)
//!
//! A simulation runs a scripted session through the session writer on a store, injects faults,
//! enters the session again after each (through the entry the case names), and checks the
//! invariants after every fault and at the end:
//!
//! - a [`Script`]: the user's message and the model's replies, each with its calls (kinds
//!   `tool`, `client`, `approval`, `remote_agent`, `local_agent`, `companion`; groups; the
//!   sequential chain);
//! - a [`ToolSet`]: each tool's replay policy and its body ([`SimTool`]), whose external effects
//!   go to a [`Ledger`] kept outside the journal ([`LedgerTool`] by default; plug a runtime's own
//!   tools in, their outside world replaced by ledger records);
//! - a [`Case`]: the [`Fault`]s, in order: a crash at any append (the batch lands, is lost, or is
//!   torn by the medium), a store failure (poisoning or not), a crash inside any body, a run
//!   abandoned while its body keeps running (its late output and result must be refused), a run
//!   the runtime fails; and after each, the [`Reentry`] entry: `wake`, `resume` (continue,
//!   from a checkpoint, with a message), `retry` (with nothing or a message), `new_turn`, `stop`;
//! - a [`Medium`]: what the store lives on and what a crash leaves of it ([`MemoryMedium`],
//!   [`SimDiskMedium`]: the file backend on a simulated disk, or a runtime's own).
//!
//! The driver acts on each entry's plan as a runtime must: a call the plan runs starts exactly
//! the planned attempt under its dispatch id; a remote sub-agent the plan re-attaches, and a
//! companion it re-enters, is finished through `Step::reattach` (no new body, the same child; a
//! companion with no child yet starts a body that starts it); bodies start in reply order,
//! each only once every call it is behind is resolved (a call behind one in doubt is skipped);
//! client calls and approvals are answered (or the run suspends for them); each step is
//! committed; the run ends once the script is done.
//!
//! [`check`] states the invariants; [`simulate`] returns a [`Report`] with every violation
//! found, the trace of what happened, the log and the ledger. [`simulate_through_drive`] runs
//! the same simulation with every step carried out by the tool executor (`Step::drive`), as a
//! runtime built on `stepjournal::Tools` runs it.
//!
//! [`explore`] checks a small scope exhaustively instead of at random: every execution of
//! every script variant of the scope, each fault at every append and body point followed by
//! every entry, deterministically and with the states deduplicated (`docs/explore.md`).
//! [`explore::actors`] searches several actors at once (two runtimes, the operator, a runtime
//! whose futures are dropped) over a store that keeps leases on a clock of its own, every step
//! of each actor a choice.
//!
//! ```
//! use stepjournal_sim::{
//!     AppendFault, Case, Fault, Landing, MemoryMedium, Reentry, Script, ScriptCall,
//!     ScriptStep, ToolSet, Trigger, simulate,
//! };
//! use stepjournal_codec::Replay;
//!
//! let tools = ToolSet::new().tool("search", Replay::Safe).tool("send_email", Replay::Unsafe);
//! let script = Script::new("Find the report and mail it to Ann")
//!     .step(
//!         ScriptStep::new("On it.")
//!             .call(ScriptCall::tool("c1", "search"))
//!             .call(ScriptCall::tool("c2", "send_email")),
//!     )
//!     .step(ScriptStep::new("Done."));
//! // The process dies inside the second body, after its first action (its output chunk), and
//! // the session is woken; then a crash at the third append after that, whose batch lands.
//! let case = Case::new()
//!     .fault(Fault::crash_in_body(1, 1).then(Reentry::Wake))
//!     .fault(Fault::crash_at_append(2, Landing::Lands).then(Reentry::Continue));
//! let report = simulate(&script, &tools, &case, &mut MemoryMedium::new()).unwrap();
//! assert!(report.is_ok(), "{}", report.summary());
//! assert_eq!(report.faults_fired, 2);
//! ```
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

mod check;
mod drive_tools;
mod driver;
mod executor;
pub mod explore;
mod fault;
mod flow;
mod ledger;
mod medium;
mod probe;
mod recorder;
mod report;
mod run;
mod script;
mod store;
#[cfg(test)]
mod tests;
mod tools;
mod via_drive;
mod violation;

pub use check::{FencedWrite, History, check};
pub use fault::{AppendFault, BodyFault, Case, Fault, Landing, Reentry, Trigger};
pub use ledger::{Ledger, LedgerEntry};
pub use medium::{Medium, MemoryMedium, SimDiskMedium, TearHook};
pub use report::{Report, ScriptError};
pub use script::{Script, ScriptCall, ScriptStep};
pub use store::Acked;
pub use tools::{BodyRun, Interrupted, LedgerTool, SimTool, ToolOutput, ToolSet, ToolSpec};
pub use violation::Violation;

/// Runs `script` with `tools` on `medium`, injecting `case`'s faults, and reports what it
/// found. Deterministic: the same inputs make the same appends, ids, times and faults.
///
/// Fails only when the script cannot be simulated (see [`ScriptError`]); everything the
/// simulation finds wrong is in [`Report::violations`].
pub fn simulate(
    script: &Script,
    tools: &ToolSet,
    case: &Case,
    medium: &mut dyn Medium,
) -> Result<Report, ScriptError> {
    Ok(driver::Sim::new(script, tools, case, medium, false, probe::Knobs::default())?.run())
}

/// [`simulate`], with each step run by the tool executor (`Step::drive`, `Run::drive`) as a
/// runtime built on it would: every tool runs as the default [`LedgerTool`] (one output chunk,
/// then its effect; a remote sub-agent's child started once per dispatch id) through
/// `stepjournal::Tools` handlers; the executor orders the calls (groups, the sequential chain)
/// and runs the rest concurrently; client calls and approvals always suspend the run, and
/// their answers are written through `Journal::answer_client` / `decide_approval`, whose woken
/// runs are driven on. Body faults fire at the same points: the handler stops there, and the
/// process dies, the runtime fails the run, or the run is abandoned and the body goes on late
/// (its late output and result must be refused).
pub fn simulate_through_drive(
    script: &Script,
    tools: &ToolSet,
    case: &Case,
    medium: &mut dyn Medium,
) -> Result<Report, ScriptError> {
    Ok(driver::Sim::new(script, tools, case, medium, true, probe::Knobs::default())?.run())
}
