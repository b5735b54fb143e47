//! [`Recorder`]: what a simulation notes as it goes: the violations it finds, the trace of what
//! happened, and the writes of fenced bodies.

use super::check::FencedWrite;
use super::violation::Violation;

/// The simulation's notes, in the order they were made.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    /// Every invariant broken so far. Invariant: no violation appears twice.
    violations: Vec<Violation>,
    trace: Vec<String>,
    fenced: Vec<FencedWrite>,
}

impl Recorder {
    /// Notes a broken invariant, once.
    pub(crate) fn violate(&mut self, violation: Violation) {
        if !self.violations.contains(&violation) {
            self.violations.push(violation);
        }
    }

    /// Notes something the simulation did not expect (the simulation cannot go on).
    pub(crate) fn unexpected(&mut self, what: String) {
        self.violate(Violation::Unexpected { what });
    }

    /// Notes what happened, for the trace.
    pub(crate) fn trace(&mut self, line: String) {
        self.trace.push(line);
    }

    /// Notes a write a fenced body tried.
    pub(crate) fn fenced(&mut self, write: FencedWrite) {
        self.fenced.push(write);
    }

    /// Every write a fenced body tried so far.
    pub(crate) fn fenced_writes(&self) -> &[FencedWrite] {
        &self.fenced
    }

    /// The violations and the trace, for the report.
    pub(crate) fn into_report_parts(self) -> (Vec<Violation>, Vec<String>) {
        (self.violations, self.trace)
    }
}
