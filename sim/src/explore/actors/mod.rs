//! The actor search: several actors over one store at once, every step of each a choice.
//!
//! Two runtimes (each lists and wakes through `recover_all`, takes the lease, drives, answers its
//! own users' decisions, ends, keeps its leases, crashes), the operator at the command line
//! (stop, answer, approve, deny, delete) and a runtime serving a new turn whose futures are
//! dropped at any store operation of `begin_run`, `commit_reply`, `drive` and `end` run over a
//! store that keeps leases by the one rule (`stepjournal_backends::lease`) on a logical clock of
//! its own. Each actor is a journal over its own handle (a process of its own), with its own
//! clock, which the variant may set ahead or behind the store's. Every asynchronous store
//! operation waits at a gate until the search lets its actor go on, so a step of an actor is
//! what it does between two store operations; the futures are polled here, on this thread, with
//! no executor and no other thread. Time passes on the store's clock only when the search says.
//!
//! The states are keyed by the logs (times aside), the leases, the clock, the operations held at
//! the gate, what each actor received in the operation it is in, each actor's program and run,
//! and the effects; interleavings that reach one key go on from it once. The distinct
//! interleavings are the paths from the start to an end through the graph of those states
//! (docs/explore.md says what that counts and what it does not).

mod actor;
mod check;
mod scope;
mod search;
mod store;
#[cfg(test)]
mod tests;
mod variant;
mod world;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

pub use actor::Role;
pub use scope::ActorScope;
pub use search::{ActorCounts, ActorFinding};
pub use variant::{ActorVariant, ActorVariantError, Cast, Setup};
pub use world::{Interleaving, InterleavingError, Move, OpName};

use super::plant::{Plant, Planted};
use super::{ExploreError, Options};
use store::Judge;

/// What an actor search found.
#[derive(Debug, Clone)]
pub struct ActorSummary {
    /// The counts, over every variant.
    pub counts: ActorCounts,
    /// The failing interleavings kept, fewest moves first.
    pub findings: Vec<ActorFinding>,
    /// The plant, if any.
    pub plant: Option<Plant>,
    /// How long it took.
    pub elapsed: Duration,
}

impl ActorSummary {
    /// The counts as the explorer prints them.
    pub fn counts_line(&self) -> String {
        let c = &self.counts;
        let secs = self.elapsed.as_secs_f64();
        format!(
            "{} distinct interleavings, {} distinct states, {} transitions, {} executions over {} \
             variants, {} failing, in {secs:.1} s ({:.0} executions/s)",
            c.interleavings,
            c.states,
            c.transitions,
            c.executions,
            c.variants,
            c.failing,
            c.executions as f64 / secs.max(1e-9)
        )
    }

    /// The failing interleavings kept, each with how to replay it.
    pub fn findings_text(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            let moves = f.interleaving.text(&f.variant);
            let _ = writeln!(
                out,
                "failing interleaving ({} moves): variant {} moves {moves}",
                f.interleaving.0.len(),
                f.variant
            );
            let _ = writeln!(out, "  replay: {}", replay_command(&f.variant, &moves, self.plant));
            for v in &f.violations {
                let _ = writeln!(out, "  violation: {v}");
            }
            for line in &f.trace {
                let _ = writeln!(out, "  trace: {line}");
            }
        }
        out
    }
}

/// The command that replays `moves` of `variant`.
pub fn replay_command(variant: &ActorVariant, moves: &str, plant: Option<Plant>) -> String {
    let planted = match plant {
        Some(p) if p.needs_feature() => {
            format!(" --features plant --example explore -- --plant {p}")
        }
        Some(p) => format!(" --example explore -- --plant {p}"),
        None => " --example explore --".to_owned(),
    };
    format!("cargo run -p stepjournal-sim{planted} --actors '{variant}' --interleaving '{moves}'")
}

fn judge(plant: Option<Plant>) -> Judge {
    match plant {
        Some(Plant::LeaseByActorClock) => Judge::Actor,
        _ => Judge::Store,
    }
}

/// Searches every interleaving of each variant.
pub fn explore_actors(
    variants: &[ActorVariant],
    options: Options,
) -> Result<ActorSummary, ExploreError> {
    let _planted = Planted::new(options.plant).map_err(ExploreError::PlantNeedsFeature)?;
    let started = Instant::now();
    let mut counts = ActorCounts::default();
    let mut findings: Vec<ActorFinding> = Vec::new();
    for variant in variants {
        let (c, found) =
            search::search(variant, judge(options.plant), options.keep, options.first_only);
        counts.add(c);
        findings.extend(found);
        if options.progress {
            let so_far = ActorSummary {
                counts,
                findings: Vec::new(),
                plant: options.plant,
                elapsed: started.elapsed(),
            };
            eprintln!("{}/{} {variant}: {}", counts.variants, variants.len(), so_far.counts_line());
        }
        if options.first_only && !findings.is_empty() {
            break;
        }
    }
    findings.sort_by_key(|f| f.interleaving.0.len());
    findings.truncate(options.keep);
    Ok(ActorSummary { counts, findings, plant: options.plant, elapsed: started.elapsed() })
}

/// Searches `scope`.
pub fn explore_actor_scope(
    scope: ActorScope,
    options: Options,
) -> Result<ActorSummary, ExploreError> {
    explore_actors(&scope.variants(), options)
}

/// Runs one interleaving again, checked as the search checks it.
pub fn replay_actors(
    variant: &ActorVariant,
    interleaving: &Interleaving,
    plant: Option<Plant>,
) -> Result<ActorFinding, ExploreError> {
    let _planted = Planted::new(plant).map_err(ExploreError::PlantNeedsFeature)?;
    let ran = search::run(variant, interleaving, judge(plant));
    Ok(ActorFinding {
        variant: variant.clone(),
        interleaving: interleaving.clone(),
        violations: ran.violations,
        trace: ran.trace,
    })
}
