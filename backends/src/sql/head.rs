//! A session's head as the SQL backends keep it: columns of its `sessions` row, moved by each
//! append from what the batch does to it.
//!
//! What a batch does to a [`RunHead`] depends on the head before it only in a narrow way (see
//! [`HeadChange`]), so an append computes the change in Rust, from the batch alone, with the one
//! rule ([`RunHead::advance`]), and the statement that moves the head row applies it: no read of
//! the row before the write, and no fold of the log, ever.

use stepjournal_codec::{Event, RunId, RunOutcome, Stamped};

use crate::head::{RunHead, RunState};

/// What a batch does to its session's [`RunHead`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeadChange {
    /// The batch holds no event the rule reads: the head stays as it was.
    Keep,
    /// The batch holds answers (`client_answer`, `approval_decided`) and no run event: the head
    /// is marked answered if its last run ended suspended, and stays otherwise.
    Answered,
    /// The batch holds a run event (`run_started`, `run_ended`): the head becomes this, whatever
    /// it was, even unknown.
    Set(RunHead),
}

fn is_run_event(event: &Event) -> bool {
    matches!(event, Event::RunStarted(_) | Event::RunEnded(_))
}

impl HeadChange {
    /// The change `events` make, by [`RunHead::advance`]: from the last run event on, the head
    /// is decided by the batch alone.
    pub(crate) fn of(events: &[Stamped]) -> Self {
        match events.iter().rposition(|e| is_run_event(&e.event)) {
            Some(last) => {
                let mut head = RunHead::default();
                head.advance_all(events.get(last..).unwrap_or_default());
                HeadChange::Set(head)
            }
            None if RunHead::touches(events) => HeadChange::Answered,
            None => HeadChange::Keep,
        }
    }

    /// The head after the change, from the head before it. Equal to advancing `old` over the
    /// batch (a unit test checks it for every head and every short batch).
    pub(crate) fn apply(&self, old: RunHead) -> RunHead {
        match self {
            HeadChange::Keep => old,
            HeadChange::Answered => {
                let suspended =
                    matches!(old.run, RunState::Ended { outcome: RunOutcome::Suspended, .. });
                RunHead {
                    answered_while_suspended: old.answered_while_suspended || suspended,
                    ..old
                }
            }
            HeadChange::Set(head) => head.clone(),
        }
    }

    /// The change's code in an append statement's parameters: 0 keep, 1 answered, 2 set.
    #[cfg(feature = "postgres")]
    pub(crate) fn code(&self) -> i16 {
        match self {
            HeadChange::Keep => 0,
            HeadChange::Answered => 1,
            HeadChange::Set(_) => 2,
        }
    }

    /// The columns a `Set` writes (for `Keep` and `Answered`, those of a session with no run,
    /// which is what a new session's row gets from them).
    #[cfg(feature = "postgres")]
    pub(crate) fn columns(&self) -> HeadColumns {
        match self {
            HeadChange::Set(head) => HeadColumns::of(head),
            HeadChange::Keep | HeadChange::Answered => HeadColumns::of(&RunHead::default()),
        }
    }
}

/// A [`RunHead`] as the columns of a `sessions` row: `run_state` (`NULL` unknown, 0 no run,
/// 1 open, 2 ended), `run_id`, `outcome` (the outcome's JSON name) and `answered`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeadColumns {
    pub state: Option<i16>,
    pub run: Option<String>,
    pub outcome: Option<String>,
    pub answered: bool,
}

/// The `run_state` code of a run that ended.
pub(crate) const ENDED: i16 = 2;

impl HeadColumns {
    pub(crate) fn of(head: &RunHead) -> Self {
        let (state, run, outcome) = match &head.run {
            RunState::NoRun => (Some(0), None, None),
            RunState::Open { run } => (Some(1), Some(run.as_str().to_owned()), None),
            RunState::Ended { run, outcome } => {
                (Some(ENDED), Some(run.as_str().to_owned()), Some(outcome.as_str().to_owned()))
            }
            RunState::Unknown => (None, None, None),
        };
        HeadColumns { state, run, outcome, answered: head.answered_while_suspended }
    }

    /// The head these columns hold. Columns no build writes (a state code, or an outcome, this
    /// build does not know; a run state without its run) read as [`RunState::Unknown`]: the
    /// caller folds the session's log, which is always right.
    pub(crate) fn head(self) -> RunHead {
        let run = match (self.state, self.run, self.outcome.as_deref().map(outcome)) {
            (Some(0), _, _) => RunState::NoRun,
            (Some(1), Some(run), _) => RunState::Open { run: RunId::new(run) },
            (Some(ENDED), Some(run), Some(Some(outcome))) => {
                RunState::Ended { run: RunId::new(run), outcome }
            }
            _ => RunState::Unknown,
        };
        let answered = self.answered && !matches!(run, RunState::Unknown);
        RunHead { run, answered_while_suspended: answered }
    }
}

fn outcome(name: &str) -> Option<RunOutcome> {
    [RunOutcome::Completed, RunOutcome::Failed, RunOutcome::Stopped, RunOutcome::Suspended]
        .into_iter()
        .find(|o| o.as_str() == name)
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::{
        ApprovalDecided, CallId, ClientAnswer, Entry, Message, RawJson, Role, RunEnded, RunStarted,
        UnixMillis,
    };

    use super::*;

    /// Every event kind the rule reads, in a few variants, and one it does not.
    fn alphabet() -> Vec<Event> {
        let ended = |run: &str, outcome| {
            Event::RunEnded(RunEnded { run: RunId::new(run), outcome, error: None, by: None })
        };
        vec![
            Event::RunStarted(RunStarted { run: RunId::new("r1"), entry: Entry::Wake, by: None }),
            ended("r1", RunOutcome::Suspended),
            ended("r1", RunOutcome::Completed),
            ended("r2", RunOutcome::Stopped),
            Event::ClientAnswer(ClientAnswer {
                call: CallId::new("c"),
                output: RawJson::default(),
            }),
            Event::ApprovalDecided(ApprovalDecided { call: CallId::new("c"), approved: true }),
            Event::Message(Message { role: Role::User, text: "hi".into() }),
        ]
    }

    /// Every head a session can have before a batch.
    fn heads() -> Vec<RunHead> {
        let mut heads =
            vec![RunHead::default(), RunHead { run: RunState::Unknown, ..Default::default() }];
        for e in alphabet() {
            for prior in heads.clone() {
                let mut next = prior;
                next.advance(&e);
                if !heads.contains(&next) {
                    heads.push(next);
                }
            }
        }
        heads
    }

    /// Every batch of up to three events of the alphabet.
    fn batches() -> Vec<Vec<Stamped>> {
        let stamp = |e: &Event| Stamped::at(UnixMillis(1), e.clone());
        let mut all: Vec<Vec<Stamped>> = vec![Vec::new()];
        let mut frontier = all.clone();
        for _ in 0..3 {
            let mut next = Vec::new();
            for b in &frontier {
                for e in alphabet() {
                    let mut longer = b.clone();
                    longer.push(stamp(&e));
                    next.push(longer);
                }
            }
            all.extend(next.iter().cloned());
            frontier = next;
        }
        all
    }

    #[test]
    fn a_change_applied_to_any_head_equals_advancing_it_over_the_batch() {
        let heads = heads();
        assert!(heads.len() >= 6, "{heads:?}");
        for batch in batches() {
            let change = HeadChange::of(&batch);
            for old in &heads {
                let mut folded = old.clone();
                folded.advance_all(&batch);
                assert_eq!(change.apply(old.clone()), folded, "{old:?} then {batch:?}");
            }
        }
    }

    #[test]
    fn every_head_survives_its_columns() {
        for head in heads() {
            assert_eq!(HeadColumns::of(&head).head(), head);
        }
    }

    #[test]
    fn columns_no_build_writes_read_as_unknown() {
        let odd = |state, run: Option<&str>, outcome: Option<&str>| HeadColumns {
            state,
            run: run.map(str::to_owned),
            outcome: outcome.map(str::to_owned),
            answered: true,
        };
        for columns in [
            odd(None, Some("r"), None),
            odd(Some(7), Some("r"), None),
            odd(Some(1), None, None),
            odd(Some(ENDED), Some("r"), Some("vanished")),
            odd(Some(ENDED), Some("r"), None),
        ] {
            let head = columns.head();
            assert_eq!(head.run, RunState::Unknown);
            assert!(!head.answered_while_suspended);
        }
    }
}
