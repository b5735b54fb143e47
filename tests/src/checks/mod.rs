//! Checks that both the fuzz targets (`fuzz/`) and stable `cargo test` (`tests/fuzz_corpus.rs`,
//! which replays the committed corpora) run on arbitrary input.
//!
//! Each check takes bytes or a structured input decoded from bytes with [`arbitrary`], drives
//! one surface of stepjournal with it, and returns `Err` describing the first violated property.
//! A check never panics on its input: a panic is a bug in the code under test, which is what the
//! fuzzer is there to find.
//!
//! - [`check_record_bytes`], [`check_batch_bytes`]: the codec's decoders.
//! - [`check_file_journal_bytes`]: opening a file journal whose segment bytes are arbitrary.
//! - [`check_scenario_json`]: reading a conformance scenario and planning it.
//! - [`check_fold_and_plan`]: the recovery fold and planner over structured logs.
//! - [`check_file_ops`]: operations on the file backend over the simulated disk, with faults and
//!   crashes, against a model.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

mod codec;
mod file_journal;
mod file_ops;
mod fold;
mod scenario;
pub mod seeds;

pub use codec::{SMALL_LIMITS, check_batch_bytes, check_record_bytes};
pub use file_journal::{
    build_disk, check_file_journal_bytes, dir as journal_dir, journal_of_input,
};
pub use file_ops::{FileOp, FileOpsInput, check_file_ops};
pub use fold::{FoldInput, check_fold_and_plan, fork_fold_agrees, snapshot_fold_agrees};
pub use scenario::check_scenario_json;

use stepjournal_codec::{Entry, Event, Replay};
use stepjournal_recovery::{Action, Config, Plan, SessionState, ToolRegistry};

/// The fuzz targets' names, each the name of a corpus directory under `fuzz/corpus/`.
pub const TARGETS: [&str; 5] =
    ["record_batch", "file_journal", "scenario_json", "fold_plan", "file_ops"];

/// Runs the check of fuzz target `target` on one input exactly as the target does (structured
/// inputs decoded with [`arbitrary::Unstructured`]). `None` for an unknown target.
pub fn run_target(target: &str, data: &[u8]) -> Option<Result<(), String>> {
    Some(match target {
        "record_batch" => check_record_bytes(data).and_then(|()| check_batch_bytes(data)),
        "file_journal" => check_file_journal_bytes(data),
        "scenario_json" => check_scenario_json(data),
        "fold_plan" => match FoldInput::from_bytes(data) {
            Some(input) => check_fold_and_plan(&input),
            None => Ok(()),
        },
        "file_ops" => match FileOpsInput::from_bytes(data) {
            Some(input) => check_file_ops(&input),
            None => Ok(()),
        },
        _ => return None,
    })
}

/// `return Err(format!(...))` unless the condition holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}
pub(crate) use ensure;

pub(crate) fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at.checked_add(4)?)?.try_into().ok().map(u32::from_le_bytes)
}

pub(crate) fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at.checked_add(8)?)?.try_into().ok().map(u64::from_le_bytes)
}

pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    if let Some(dst) = at.checked_add(4).and_then(|end| b.get_mut(at..end)) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
}

/// The plan's invariants over the state it was made from:
/// - a refused entry writes nothing and decides nothing;
/// - every call of the saved step appears once, in reply order, and nothing else does;
/// - a `run` starts attempt `bodies + 1`, within `max_bodies`, and a call that already started a
///   body runs again only when its saved policy and its tool's current policy are both safe and
///   its arguments pass;
/// - a `paired` is appended for each `pair` decision, in order; the appends come in FORMAT.md's
///   order, with one `run_started` unless the entry is a stop.
pub fn check_plan(
    state: &SessionState,
    plan: &Plan,
    entry: &Entry,
    registry: &dyn ToolRegistry,
    config: &Config,
) -> Result<(), String> {
    if let Some(error) = &plan.error {
        ensure!(
            plan.step.is_none() && plan.calls.is_empty() && plan.appends.is_empty(),
            "the refused plan ({error}) still decides or writes: {plan:?}"
        );
        return Ok(());
    }
    let saved = state.saved_step();
    ensure!(plan.step == saved.map(|r| r.step), "plan.step {:?} is not the saved step", plan.step);
    let records = saved.map(|r| state.calls_of(r)).unwrap_or_default();
    let expected: Vec<_> = records.iter().map(|r| r.id()).collect();
    let planned: Vec<_> = plan.calls.iter().map(|c| &c.call).collect();
    ensure!(planned == expected, "planned calls {planned:?}, the saved step holds {expected:?}");
    for (i, id) in planned.iter().enumerate() {
        ensure!(!planned.iter().skip(i + 1).any(|other| other == id), "{id} is planned twice");
    }
    for (record, decision) in records.iter().zip(&plan.calls) {
        let Action::Run { attempt, .. } = decision.action else { continue };
        let bodies = record.bodies();
        ensure!(
            u64::from(attempt.get()) == u64::from(bodies) + 1,
            "{decision:?}: {bodies} bodies started, yet attempt {attempt}"
        );
        ensure!(
            (1..=config.max_bodies()).contains(&attempt.get()),
            "{decision:?}: attempt {attempt} with max_bodies {}",
            config.max_bodies()
        );
        if bodies > 0 {
            let call = record.call();
            ensure!(call.replay == Replay::Safe, "{decision:?}: the saved policy is unsafe");
            ensure!(
                registry.policy(&call.tool) == Some(Replay::Safe),
                "{decision:?}: the tool's current policy is {:?}",
                registry.policy(&call.tool)
            );
            ensure!(
                registry.check_args(&call.tool, &call.args).passes(),
                "{decision:?}: the saved arguments fail the tool's schema"
            );
        }
    }
    let paired: Vec<_> = plan
        .appends
        .iter()
        .filter_map(|e| match e {
            Event::Paired(p) => Some(&p.call),
            _ => None,
        })
        .collect();
    let pairs: Vec<_> = plan
        .calls
        .iter()
        .filter(|c| matches!(c.action, Action::Pair { .. }))
        .map(|c| &c.call)
        .collect();
    ensure!(paired == pairs, "appends pair {paired:?}, decisions pair {pairs:?}");
    let rank = |e: &Event| match e {
        Event::RunStarted(_) => 0,
        Event::Rewound(_) => 1,
        Event::Paired(_) => 2,
        Event::StepCommit(_) => 3,
        Event::Message(_) => 4,
        Event::RunEnded(_) => 5,
        _ => 9,
    };
    let ranks: Vec<u8> = plan.appends.iter().map(rank).collect();
    ensure!(
        ranks.windows(2).all(|w| w.first() <= w.get(1)) && !ranks.contains(&9),
        "appends out of FORMAT.md's order: {:?}",
        plan.appends
    );
    let starts = ranks.iter().filter(|r| **r == 0).count();
    ensure!(
        starts == usize::from(*entry != Entry::Stop),
        "{starts} run_started appended for {entry:?}"
    );
    Ok(())
}
