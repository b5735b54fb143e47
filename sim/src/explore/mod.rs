//! The exhaustive explorer: every execution of the real writer (and of `drive`) over the memory
//! store in a small scope, deterministically.
//!
//! A script [`Variant`] fixes the first reply's calls (each a kind, the policy the model saw,
//! the tool as a deploy left it after the first fault), their order attribute, `max_bodies`,
//! a second reply or not, and the runner. For each variant the search runs the execution with
//! no fault, then every execution one fault longer, breadth first: the next fault fires at any
//! append after the last one (a crash whose batch landed or was lost, a store failure that
//! poisons or not) or at any of four points of any body (a crash, the run abandoned while the
//! body goes on and writes late, the run failed), and is followed by any entry. Each execution
//! is a fresh simulation of its [`Choices`] (a fixed clock, sequential ids, no threads), so it
//! replays exactly; the states after each fault are keyed by the log's bytes, the ledger, what
//! the store acknowledged, the fenced writes, the body left running and the entry made next,
//! and a choice vector whose last state was reached before is not extended.
//!
//! Every execution is checked with the simulator's invariants ([`check`](crate::check), which
//! runs `recovery::verify`); every new state also has its log written to the file backend on a
//! simulated disk and exported and imported, and each entry's plan over each copy must be the
//! memory store's.

pub mod actors;
mod choice;
mod deploy;
mod mirror;
mod plant;
mod scope;
mod search;
#[cfg(test)]
mod tests;
mod variant;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

pub use choice::{Choices, ChoicesError, Job, Menu};
pub use plant::Plant;
pub use scope::{Scope, shapes};
pub use search::{Counts, Finding};
pub use variant::{Answers, CallShape, Now, Order, Runner, Variant, VariantError};

use crate::ScriptError;
use plant::Planted;
use search::{Bounds, search};

/// What the explorer is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The bug planted, if any.
    pub plant: Option<Plant>,
    /// Stop at the first failing execution with the fewest faults.
    pub first_only: bool,
    /// Failing executions kept for the summary.
    pub keep: usize,
    /// Print the counts so far on standard error after each variant.
    pub progress: bool,
}

impl Default for Options {
    /// No plant; every failing execution counted, the first 10 kept.
    fn default() -> Self {
        Options { plant: None, first_only: false, keep: 10, progress: false }
    }
}

/// Why the explorer cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExploreError {
    /// A variant the simulator cannot run.
    #[error("variant {variant}: {source}")]
    Script {
        /// The variant.
        variant: String,
        /// Why.
        source: ScriptError,
    },
    /// The plant changes the rules, and this build has not the `plant` feature.
    #[error("plant `{0}` needs stepjournal-sim's `plant` feature")]
    PlantNeedsFeature(Plant),
}

/// What a search found.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The counts, over every variant.
    pub counts: Counts,
    /// The failing executions kept, fewest faults first.
    pub findings: Vec<Finding>,
    /// How long it took.
    pub elapsed: Duration,
}

impl Summary {
    /// The counts as the explorer prints them.
    pub fn counts_line(&self) -> String {
        let c = &self.counts;
        format!(
            "{} distinct executions, {} distinct states, {} simulations over {} variants, \
             {} choice vectors pruned, {} failing, in {:.1} s",
            c.executions,
            c.states,
            c.simulations,
            c.variants,
            c.pruned,
            c.failing,
            self.elapsed.as_secs_f64()
        )
    }

    /// The failing executions kept, each with how to replay it.
    pub fn findings_text(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            let _ = writeln!(out, "failing execution: variant {} choices {}", f.variant, f.choices);
            let planted = match f.plant {
                Some(p) if p.needs_feature() => {
                    format!(" --features plant --example explore -- --plant {p}")
                }
                Some(p) => format!(" --example explore -- --plant {p}"),
                None => " --example explore --".to_owned(),
            };
            let _ = writeln!(
                out,
                "  replay: cargo run -p stepjournal-sim{planted} --variant '{}' --choices '{}'",
                f.variant, f.choices
            );
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

/// Searches every job's variant, with its faults.
pub fn explore(jobs: &[Job], options: Options) -> Result<Summary, ExploreError> {
    let _planted = Planted::new(options.plant).map_err(ExploreError::PlantNeedsFeature)?;
    let started = Instant::now();
    let mut counts = Counts::default();
    let mut findings: Vec<Finding> = Vec::new();
    for job in jobs {
        let variant = &job.variant;
        // Once a failing execution is known, only shorter ones are looked for.
        let mut menus = job.menus.clone();
        if options.first_only
            && let Some(best) = findings.first()
        {
            if best.choices.0.is_empty() {
                break;
            }
            menus.truncate(best.choices.0.len() - 1);
        }
        let bounds = Bounds { menus, first_only: options.first_only, plant: options.plant };
        let (c, found) = search(variant, &bounds, options.keep)
            .map_err(|source| ExploreError::Script { variant: variant.to_string(), source })?;
        counts.add(c);
        if options.progress {
            let so_far = Summary { counts, findings: Vec::new(), elapsed: started.elapsed() };
            eprintln!("{}/{} {variant}: {}", counts.variants, jobs.len(), so_far.counts_line());
        }
        if options.first_only {
            if let Some(f) = found.into_iter().next() {
                findings = vec![f];
            }
        } else {
            findings.extend(found);
        }
    }
    findings.sort_by_key(|f| f.choices.0.len());
    findings.truncate(options.keep);
    Ok(Summary { counts, findings, elapsed: started.elapsed() })
}

/// Searches `scope`.
pub fn explore_scope(scope: Scope, options: Options) -> Result<Summary, ExploreError> {
    explore(&scope.jobs(), options)
}

/// Runs one execution again: `variant` with `choices`, checked as the search checks it.
pub fn replay(
    variant: &Variant,
    choices: &Choices,
    plant: Option<Plant>,
) -> Result<Finding, ExploreError> {
    let _planted = Planted::new(plant).map_err(ExploreError::PlantNeedsFeature)?;
    let mut seen = search::Seen::default();
    let ran = search::simulate_one(variant, choices, plant, &mut seen)
        .map_err(|source| ExploreError::Script { variant: variant.to_string(), source })?;
    Ok(Finding {
        variant: variant.clone(),
        choices: choices.clone(),
        violations: ran.violations,
        trace: ran.report.trace,
        plant,
    })
}
