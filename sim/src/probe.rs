//! What an outside search sets on a simulation and sees of it: [`Knobs`] (the registry recovery
//! reads, the clock, the writer's settings) and a [`Probe`] told the state at every re-entry
//! and, at the end, how many appends and bodies followed the last fault.

use std::sync::Arc;

use stepjournal_codec::{CallId, Entry, Record};
use stepjournal_recovery::{Config, ToolRegistry};

use super::check::FencedWrite;
use super::ledger::LedgerEntry;
use super::store::Acked;

/// Settings a search gives one simulation; [`Knobs::default`] is what [`simulate`](crate::simulate)
/// uses.
#[derive(Default)]
pub(crate) struct Knobs<'p> {
    /// The registry the writer's recovery reads, when it is not the tool set's (a deploy
    /// between a crash and its recovery).
    pub(crate) registry: Option<Arc<dyn ToolRegistry + Send + Sync>>,
    /// Every append stamped with the same time (so that equal states have equal bytes),
    /// instead of 1 ms apart.
    pub(crate) fixed_clock: bool,
    /// The settings the writer is given, when not the case's (the checks keep the case's).
    pub(crate) writer_config: Option<Config>,
    /// Told what happens.
    pub(crate) probe: Option<&'p mut dyn Probe>,
}

/// The state of a simulation just after a fault, when the session is entered again: what
/// the continuation depends on.
pub(crate) struct Snapshot<'s> {
    /// Faults fired so far (this one included).
    pub(crate) fired: u32,
    /// The session's log as the store holds it now.
    pub(crate) log: &'s [Record],
    /// The entry made next.
    pub(crate) entry: &'s Entry,
    /// The ledger so far.
    pub(crate) ledger: &'s [LedgerEntry],
    /// Every append acknowledged so far.
    pub(crate) acked: &'s [Acked],
    /// Every write a fenced body tried so far.
    pub(crate) fenced: &'s [FencedWrite],
    /// A body left running by an abandoned run, which writes once the entry landed: its call
    /// and its attempt (whether it performed its effect is in the ledger).
    pub(crate) late: Option<(CallId, u32)>,
    /// Runs begun so far.
    pub(crate) runs: u32,
}

/// How a simulation went on after its last fault (or from the start, with none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tail {
    /// Appends the store was asked for (each one a place a next fault can fire).
    pub(crate) appends: u32,
    /// Bodies started or re-attached to.
    pub(crate) bodies: u32,
}

/// Told the state at every re-entry and, at the end, what followed the last fault.
pub(crate) trait Probe {
    /// A fault fired; the session is about to be entered again.
    fn entered(&mut self, at: &Snapshot<'_>);
    /// The simulation ended; `tail` counts what followed its last fault.
    fn ended(&mut self, tail: Tail);
}
