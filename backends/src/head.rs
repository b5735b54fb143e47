//! What a store keeps beside each session's log for a runtime's start-up: the state of its last
//! run ([`SessionHead`]), kept as batches land so that finding the sessions to recover folds
//! none of them, and the lease of the process running it ([`Lease`]), on stores that several
//! processes share.

use std::fmt;

use stepjournal_codec::{Event, Record, RunId, RunOutcome, Seq, SessionId, Stamped, UnixMillis};

/// A runtime process that owns runs: the holder of their leases. Any text; the writer's default
/// is `host:pid:random`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OwnerId(String);

impl OwnerId {
    /// The owner called `id`.
    pub fn new(id: impl Into<String>) -> Self {
        OwnerId(id.into())
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who runs a session's open run, and until when, unless renewed.
///
/// A lease lapses by the store's clock, the one that set [`expires`](Self::expires): the
/// server's on PostgreSQL, the machine's on SQLite. Judge it by that clock, as read with the
/// lease ([`SessionHead::live_lease`], or [`is_live_at`](Self::is_live_at) with
/// [`SessionHead::read_at`]), never by the caller's own clock: a caller whose clock runs ahead
/// would call a live lease lapsed (and wake, fence or delete a running session), one whose
/// clock runs behind a lapsed lease live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The process holding it.
    pub owner: OwnerId,
    /// The run it covers.
    pub run: RunId,
    /// When it lapses unless renewed, by the store's clock (the server's, for PostgreSQL).
    pub expires: UnixMillis,
}

impl Lease {
    /// Whether the lease is live at `now`, a reading of the store's clock (it lapses at
    /// [`expires`](Self::expires): live while `now < expires`). Pass the store's time read with
    /// the lease ([`SessionHead::read_at`]), not the caller's clock.
    pub fn is_live_at(&self, now: UnixMillis) -> bool {
        now < self.expires
    }
}

/// What the log says of a session's last run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// No run was ever begun.
    NoRun,
    /// A run began (`run_started`) and has no `run_ended`: it is running, or its process died.
    Open {
        /// The run.
        run: RunId,
    },
    /// The last run ended.
    Ended {
        /// The run.
        run: RunId,
        /// How.
        outcome: RunOutcome,
    },
    /// The store has no head for the session (written by an older version): fold the session's
    /// log to learn it.
    Unknown,
}

/// A session's summary, kept by the store as batches land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHead {
    /// The session.
    pub session: SessionId,
    /// Its next sequence number.
    pub tail: Seq,
    /// When its last batch was appended.
    pub last_at: UnixMillis,
    /// Its last run.
    pub run: RunState,
    /// Whether a `client_answer` or an `approval_decided` was appended after the last run ended
    /// `suspended`: the answer the run waited for may be there, so a wake has work to do.
    pub answered_while_suspended: bool,
    /// The lease on its open run, where the store keeps leases and one is held, live or
    /// lapsed: [`live_lease`](Self::live_lease) says which, by the store's clock.
    pub lease: Option<Lease>,
    /// The store's clock when it read this head, by which [`lease`](Self::lease) is judged:
    /// on PostgreSQL the server's `now()`, selected in the statement that read the head; on
    /// SQLite this machine's clock, read by the store as it read the head. `None` on a store
    /// that keeps no leases (file, memory).
    pub read_at: Option<UnixMillis>,
}

impl SessionHead {
    /// The head's lease if it is live by the store's clock when the head was read
    /// ([`read_at`](Self::read_at)): what every judge of a lease asks (a runtime's start-up,
    /// the command's `sessions`, `delete`, `answer`), never comparing [`Lease::expires`] with a
    /// clock of its own. A lease with no store time beside it (a store that keeps leases but
    /// gave none) is taken as live: nothing says it lapsed.
    pub fn live_lease(&self) -> Option<&Lease> {
        let lease = self.lease.as_ref()?;
        self.read_at.is_none_or(|now| lease.is_live_at(now)).then_some(lease)
    }
}

/// The part of a [`SessionHead`] that the events themselves decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHead {
    /// The last run.
    pub run: RunState,
    /// See [`SessionHead::answered_while_suspended`].
    pub answered_while_suspended: bool,
}

impl Default for RunHead {
    fn default() -> Self {
        RunHead { run: RunState::NoRun, answered_while_suspended: false }
    }
}

impl RunHead {
    /// The head after `event`. The one rule every backend keeps its heads by.
    pub fn advance(&mut self, event: &Event) {
        match event {
            Event::RunStarted(e) => {
                self.run = RunState::Open { run: e.run.clone() };
                self.answered_while_suspended = false;
            }
            Event::RunEnded(e) => {
                self.run = RunState::Ended { run: e.run.clone(), outcome: e.outcome };
                self.answered_while_suspended = false;
            }
            Event::ClientAnswer(_) | Event::ApprovalDecided(_) => {
                if matches!(self.run, RunState::Ended { outcome: RunOutcome::Suspended, .. }) {
                    self.answered_while_suspended = true;
                }
            }
            _ => {}
        }
    }

    /// The head a log as a store reads it leaves (oldest first, dense): [`advance`](Self::advance)
    /// over every event of a log from seq 0; a log that starts later (trimmed, or read from its
    /// newest snapshot) starts from its first snapshot's last run and last run end, then
    /// advances over what follows. With no snapshot to start from, the head is unknown.
    pub fn of_log(records: &[Record]) -> RunHead {
        let mut head = RunHead::default();
        let from = match records.first() {
            Some(first) if first.seq.get() > 0 => {
                let Some(at) = records.iter().position(|r| matches!(r.event, Event::Snapshot(_)))
                else {
                    return RunHead { run: RunState::Unknown, answered_while_suspended: false };
                };
                if let Some(Event::Snapshot(s)) = records.get(at).map(|r| &r.event) {
                    head.run = match (&s.run, &s.run_end) {
                        (Some(r), Some(e)) if r.seq > e.seq => {
                            RunState::Open { run: r.run.clone() }
                        }
                        (_, Some(e)) => RunState::Ended { run: e.run.clone(), outcome: e.outcome },
                        (Some(r), None) => RunState::Open { run: r.run.clone() },
                        (None, None) => RunState::NoRun,
                    };
                }
                at + 1
            }
            _ => 0,
        };
        for r in records.get(from..).unwrap_or_default() {
            head.advance(&r.event);
        }
        head
    }

    /// The head after a batch.
    pub fn advance_all(&mut self, events: &[Stamped]) {
        for e in events {
            self.advance(&e.event);
        }
    }

    /// Whether a batch could change a head: it holds an event [`advance`](Self::advance) reads.
    pub fn touches(events: &[Stamped]) -> bool {
        events.iter().any(|e| Self::moves(&e.event))
    }

    /// Whether [`advance`](Self::advance) reads `event` (every other event leaves a head as it
    /// is).
    pub fn moves(event: &Event) -> bool {
        matches!(
            event,
            Event::RunStarted(_)
                | Event::RunEnded(_)
                | Event::ClientAnswer(_)
                | Event::ApprovalDecided(_)
        )
    }
}

/// A store's figures since it was opened, for a runtime to export as metrics. Counters only
/// grow; a backend that does not measure a figure leaves it 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreMetrics {
    /// Batches appended (acknowledged).
    pub appends: u64,
    /// Groups committed (one write or transaction each; `appends / groups` is the mean group).
    pub groups: u64,
    /// The largest group committed.
    pub max_group: u64,
    /// Syncs (`fdatasync`, or durable commits) made.
    pub syncs: u64,
    /// The time spent in syncs, in microseconds (`sync_micros / syncs` is the mean latency).
    pub sync_micros: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Whether the store is poisoned (1) or not (0).
    pub poisoned: u64,
    /// Leases of another owner's live run replaced by a forced take.
    pub leases_taken_over: u64,
    /// Failures of work off the append path (the file backend's reclaim thread: sidecars,
    /// removals, directory syncs, reads for compaction, damage compaction found), each reported
    /// and tried again later, never poisoning the store.
    pub reclaim_failures: u64,
}

/// What [`JournalStore::take_lease`](crate::JournalStore::take_lease) did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseTaken {
    /// The lease is the caller's now, until `expires`.
    Taken {
        /// When it lapses unless renewed.
        expires: UnixMillis,
        /// The live lease of another owner it replaced (only when forced): a run taken over.
        took_over: Option<Lease>,
    },
    /// Another owner holds a live lease on the session; nothing changed.
    HeldBy(Lease),
    /// This store keeps no leases: one process writes it at a time (the file backend's
    /// directory lock, the memory backend's process), so a run open when the store was opened
    /// is one whose process died.
    NotKept,
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::{CallId, Entry};
    use stepjournal_codec::{ClientAnswer, RawJson, RunEnded, RunStarted};

    use super::*;

    fn started(run: &str) -> Event {
        Event::RunStarted(RunStarted { run: RunId::new(run), entry: Entry::Wake, by: None })
    }

    fn ended(run: &str, outcome: RunOutcome) -> Event {
        Event::RunEnded(RunEnded { run: RunId::new(run), outcome, error: None, by: None })
    }

    fn answer() -> Event {
        Event::ClientAnswer(ClientAnswer { call: CallId::new("c1"), output: RawJson::default() })
    }

    fn head(lease: Option<Lease>, read_at: Option<UnixMillis>) -> SessionHead {
        SessionHead {
            session: SessionId::new("s").unwrap(),
            tail: Seq(1),
            last_at: UnixMillis(0),
            run: RunState::Open { run: RunId::new("r1") },
            answered_while_suspended: false,
            lease,
            read_at,
        }
    }

    #[test]
    fn a_lease_is_live_until_its_expiry_by_the_store_s_clock_read_with_the_head() {
        let lease =
            Lease { owner: OwnerId::new("o"), run: RunId::new("r1"), expires: UnixMillis(100) };
        assert!(lease.is_live_at(UnixMillis(99)));
        assert!(!lease.is_live_at(UnixMillis(100)), "it lapses at its expiry");
        assert_eq!(head(Some(lease.clone()), Some(UnixMillis(99))).live_lease(), Some(&lease));
        assert_eq!(head(Some(lease.clone()), Some(UnixMillis(100))).live_lease(), None);
        assert_eq!(head(None, Some(UnixMillis(0))).live_lease(), None);
        assert_eq!(
            head(Some(lease.clone()), None).live_lease(),
            Some(&lease),
            "no store time: nothing says it lapsed"
        );
    }

    #[test]
    fn a_run_started_without_an_end_is_open_and_its_end_closes_it() {
        let mut head = RunHead::default();
        head.advance(&started("r1"));
        assert_eq!(head.run, RunState::Open { run: RunId::new("r1") });
        head.advance(&ended("r1", RunOutcome::Completed));
        assert_eq!(
            head.run,
            RunState::Ended { run: RunId::new("r1"), outcome: RunOutcome::Completed }
        );
    }

    #[test]
    fn an_answer_after_a_suspension_is_noted_and_the_next_run_clears_it() {
        let mut head = RunHead::default();
        head.advance(&started("r1"));
        head.advance(&answer());
        assert!(!head.answered_while_suspended, "an answer inside a running run is not noted");
        head.advance(&ended("r1", RunOutcome::Suspended));
        assert!(!head.answered_while_suspended);
        head.advance(&answer());
        assert!(head.answered_while_suspended);
        head.advance(&started("r2"));
        assert!(!head.answered_while_suspended);
    }
}
