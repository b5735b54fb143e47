//! The search: every execution of one script variant, breadth first by the number of faults,
//! each one a fresh deterministic simulation of its choice vector, with the states it reaches
//! deduplicated so the search stays finite.

use std::collections::{HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use stepjournal_codec::json::event_to_json;
use stepjournal_codec::{Entry, Record};
use stepjournal_recovery::{Config, ToolRegistry, plan};

use super::super::driver::Sim;
use super::super::probe::{Knobs, Probe, Snapshot, Tail};
use super::choice::{Choices, Menu};
use super::deploy::Deploy;
use super::mirror::{self, FileMirror};
use super::plant::{Plant, PlantMedium};
use super::variant::{Runner, Variant};
use crate::{Report, ScriptError, Violation};

/// An execution that broke an invariant.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The script variant.
    pub variant: Variant,
    /// The faults, in order: replay with `--variant VARIANT --choices CHOICES`.
    pub choices: Choices,
    /// What it broke.
    pub violations: Vec<Violation>,
    /// What happened.
    pub trace: Vec<String>,
    /// The bug planted, if any.
    pub plant: Option<Plant>,
}

/// What searching one variant (or a whole scope) counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Script variants searched.
    pub variants: u64,
    /// Simulations run (one per choice vector).
    pub simulations: u64,
    /// Distinct executions: simulations whose states, in order, and final log differ from
    /// every other's of the same variant.
    pub executions: u64,
    /// Distinct states checked: a state after a fault (the log, the ledger, what the store
    /// acknowledged, the fenced writes, a body left running, the entry made next), or at an
    /// execution's end.
    pub states: u64,
    /// Choice vectors not extended because the state after their last fault was reached
    /// before (their continuations are those of that state).
    pub pruned: u64,
    /// Executions that broke an invariant.
    pub failing: u64,
}

impl Counts {
    pub(crate) fn add(&mut self, other: Counts) {
        self.variants += other.variants;
        self.simulations += other.simulations;
        self.executions += other.executions;
        self.states += other.states;
        self.pruned += other.pruned;
        self.failing += other.failing;
    }
}

/// What one search is told.
#[derive(Debug, Clone)]
pub(crate) struct Bounds {
    /// The menu of each fault; faults per execution, at most, is their number.
    pub(crate) menus: Vec<Menu>,
    /// Stop at the first failing execution (it has the fewest faults of the variant's).
    pub(crate) first_only: bool,
    /// The bug planted, if any.
    pub(crate) plant: Option<Plant>,
}

/// Hashes `value` into `h`, through its debug form where it has no `Hash`.
fn debug_hash(h: &mut DefaultHasher, value: &impl std::fmt::Debug) {
    format!("{value:?}").hash(h);
}

fn log_hash(h: &mut DefaultHasher, log: &[Record]) {
    log.len().hash(h);
    for record in log {
        event_to_json(&record.event).hash(h);
        record.at.0.hash(h);
    }
}

/// The report of a simulation that panicked.
fn panicked(what: String) -> Report {
    Report {
        medium: "memory".to_owned(),
        session: stepjournal_codec::SessionId::from_stored("sim-session"),
        violations: vec![Violation::Unexpected {
            what: format!("the simulation panicked: {what}"),
        }],
        faults_fired: 0,
        runs: 0,
        outcome: None,
        trace: Vec::new(),
        log: Vec::new(),
        ledger: Vec::new(),
    }
}

/// A log's hash: its events' bytes and times.
pub(crate) fn hash_of_log(log: &[Record]) -> u64 {
    let mut h = DefaultHasher::new();
    log_hash(&mut h, log);
    h.finish()
}

/// The entry the writer really makes: a `retry` the state refuses is made as a `wake`.
fn effective(entry: &Entry, log: &[Record], registry: &dyn ToolRegistry, config: &Config) -> Entry {
    if !matches!(entry, Entry::Retry { checkpoint: None, message: None }) {
        return entry.clone();
    }
    let new_run = mirror::next_run(entry.clone());
    if plan(&mirror::fold(log), &new_run, registry, config).error.is_some() {
        Entry::Wake
    } else {
        entry.clone()
    }
}

/// The probe of one simulation: keys the states it reaches, checks the new ones' copies, and
/// flips the registry at the first fault.
struct Recording<'s> {
    deploy: Arc<Deploy>,
    config: Config,
    seen: &'s mut HashSet<u64>,
    /// The logs whose copies were compared already (by their hash).
    mirrored: &'s mut HashSet<u64>,
    file: &'s mut FileMirror,
    /// The choice vector, for the mirror's notes.
    made_by: String,
    /// Each state's key, in order.
    keys: Vec<u64>,
    /// Whether the last state was reached for the first time.
    last_new: bool,
    tail: Option<Tail>,
    mismatches: Vec<Violation>,
}

impl Recording<'_> {
    fn check_copies(&mut self, log: &[Record], registry: &dyn ToolRegistry) {
        let hash = hash_of_log(log);
        if !self.mirrored.insert(hash) {
            return;
        }
        let made_by = self.made_by.clone();
        if let Err(m) = mirror::compare(self.file, (log, hash, &made_by), registry, &self.config) {
            self.mismatches.push(Violation::CopiesDiffer { what: m.what });
        }
    }
}

impl Probe for Recording<'_> {
    fn entered(&mut self, at: &Snapshot<'_>) {
        self.deploy.deploy();
        let deploy = self.deploy.clone();
        let registry = deploy.after();
        let mut h = DefaultHasher::new();
        at.fired.hash(&mut h);
        log_hash(&mut h, at.log);
        debug_hash(&mut h, &at.ledger);
        for acked in at.acked {
            (acked.first.get(), acked.events.len()).hash(&mut h);
        }
        debug_hash(&mut h, &at.fenced);
        debug_hash(&mut h, &at.late);
        at.runs.hash(&mut h);
        debug_hash(&mut h, &effective(at.entry, at.log, registry, &self.config));
        let key = h.finish();
        self.keys.push(key);
        self.last_new = self.seen.insert(key);
        if self.last_new {
            self.check_copies(at.log, registry);
        }
    }

    fn ended(&mut self, tail: Tail) {
        self.tail = Some(tail);
    }
}

/// What one variant's search has seen.
pub(crate) struct Seen {
    /// The keys of the states reached (after a fault, or an execution's end).
    states: HashSet<u64>,
    /// The hashes of the logs whose copies were compared.
    logs: HashSet<u64>,
    /// Where those logs were written on the file backend.
    file: FileMirror,
}

impl Default for Seen {
    fn default() -> Self {
        Seen { states: HashSet::new(), logs: HashSet::new(), file: FileMirror::new() }
    }
}

/// One simulation of `variant` with `choices`, checked.
pub(crate) struct Ran {
    pub(crate) report: Report,
    pub(crate) violations: Vec<Violation>,
    /// Whether its end (its states in order, its final log and ledger) was new.
    end_new: bool,
    last_new: bool,
    tail: Option<Tail>,
}

pub(crate) fn simulate_one(
    variant: &Variant,
    choices: &Choices,
    plant: Option<Plant>,
    seen: &mut Seen,
) -> Result<Ran, ScriptError> {
    let script = variant.script();
    let tools = variant.tools();
    let config = variant.config();
    let deploy = Arc::new(Deploy::new(tools.registry(), variant.registry_now()));
    let case = variant.case(choices.0.clone());
    let mut recording = Recording {
        deploy: deploy.clone(),
        config,
        seen: &mut seen.states,
        mirrored: &mut seen.logs,
        file: &mut seen.file,
        made_by: choices.to_string(),
        keys: Vec::new(),
        last_new: true,
        tail: None,
        mismatches: Vec::new(),
    };
    let writer_config = match plant {
        Some(Plant::MaxBodiesOffByOne) => Config::new(config.max_bodies() + 1).ok(),
        _ => None,
    };
    let knobs = Knobs {
        registry: Some(deploy.clone()),
        fixed_clock: true,
        writer_config,
        probe: Some(&mut recording),
    };
    let mut medium = PlantMedium::new(plant);
    let through_drive = variant.runner == Runner::Drive;
    let sim = Sim::new(&script, &tools, &case, &mut medium, through_drive, knobs)?;
    // A panic of the writer (a failed debug assertion) is a finding like any other.
    let report = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.run())) {
        Ok(report) => report,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "a panic".to_owned());
            panicked(what)
        }
    };
    // The end: the log read back after a clean restart, the ledger, what was found.
    let mut h = DefaultHasher::new();
    recording.keys.hash(&mut h);
    log_hash(&mut h, &report.log);
    debug_hash(&mut h, &report.ledger);
    debug_hash(&mut h, &report.outcome);
    let end_new = recording.seen.insert(h.finish());
    if end_new {
        let registry: &dyn ToolRegistry = &*deploy;
        recording.check_copies(&report.log, registry);
    }
    let Recording { last_new, tail, mismatches, .. } = recording;
    let mut violations = report.violations.clone();
    violations.extend(mismatches);
    Ok(Ran { report, violations, end_new, last_new, tail })
}

/// Searches every execution of `variant` within `bounds`; returns the counts and the failing
/// executions (the first `keep` of them, fewest faults first).
pub(crate) fn search(
    variant: &Variant,
    bounds: &Bounds,
    keep: usize,
) -> Result<(Counts, Vec<Finding>), ScriptError> {
    let mut counts = Counts { variants: 1, ..Counts::default() };
    let mut findings = Vec::new();
    let mut seen = Seen::default();
    let mut queue = VecDeque::from([Choices::default()]);
    while let Some(choices) = queue.pop_front() {
        let ran = simulate_one(variant, &choices, bounds.plant, &mut seen)?;
        counts.simulations += 1;
        if ran.end_new {
            counts.executions += 1;
        }
        if !ran.violations.is_empty() {
            counts.failing += 1;
            if findings.len() < keep {
                findings.push(Finding {
                    variant: variant.clone(),
                    choices: choices.clone(),
                    violations: ran.violations,
                    trace: ran.report.trace,
                    plant: bounds.plant,
                });
            }
            if bounds.first_only {
                break;
            }
            continue;
        }
        let all_fired = ran.report.faults_fired as usize == choices.0.len();
        let Some(menu) = bounds.menus.get(choices.0.len()).filter(|_| all_fired) else {
            continue;
        };
        if !ran.last_new && !choices.0.is_empty() {
            counts.pruned += 1;
            continue;
        }
        if let Some(tail) = ran.tail {
            queue.extend(choices.children(tail, menu));
        }
    }
    // Every key is a state after a fault or an execution's end.
    counts.states = seen.states.len() as u64;
    if let Err((choices, what)) = seen.file.reread(hash_of_log) {
        counts.failing += 1;
        findings.push(Finding {
            variant: variant.clone(),
            choices: choices.parse().unwrap_or_default(),
            violations: vec![Violation::CopiesDiffer { what }],
            trace: Vec::new(),
            plant: bounds.plant,
        });
    }
    Ok((counts, findings))
}
