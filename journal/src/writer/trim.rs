//! Trims: [`Journal::trim`] drops a session's events before a kept `snapshot` by appending a
//! `trimmed` event, which the store applies atomically with the append (its compare-and-set at
//! the tail the trim read: a session another actor wrote to meanwhile is left as it is).
//!
//! What a trim keeps ([`trim_point`], in the recovery crate: a pure function of the log): the
//! log from a snapshot that
//! - is not the newest intact one (the one before it is kept too, so a damaged newest
//!   snapshot is never the only one);
//! - lies at or before the start of the last `keep_turns` turns (runs begun by a new message);
//! - needs nothing before it: a fold from it plans every entry without the history (no
//!   `rewound` after it reaches back before it).
//!
//! A snapshot stands at a committed step boundary, so every open call, pending approval and
//! client call lies after it, and so does every child a call attached. A `from_checkpoint` or
//! `retry` naming a checkpoint that was trimmed away is refused as an unknown checkpoint.

use stepjournal_backends::{AppendError, Durability, JournalStore, StoreError};
use stepjournal_codec::{Coded, ErrorCode, Event, RunId, Seq, SessionId, Stamped, Trimmed};
use stepjournal_recovery::trim_point;

use super::clock::Clock;

/// What [`Journal::trim`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Trim {
    /// The events before `before` were dropped; the `trimmed` event is at `at`.
    Trimmed {
        /// The first seq kept: a snapshot.
        before: Seq,
        /// Where the log started before the trim.
        from: Seq,
        /// Where the `trimmed` event landed.
        at: Seq,
        /// The turns dropped over every trim of the session (what the event records).
        turns: u64,
    },
    /// Nothing could be dropped: the reason, in words.
    Nothing {
        /// Why.
        why: String,
    },
}

impl Trim {
    /// The JSON form the bindings hand a runtime: `{"trimmed": true, "before", "from", "at",
    /// "turns"}` or `{"trimmed": false, "why"}`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Trim::Trimmed { before, from, at, turns } => serde_json::json!({
                "trimmed": true, "before": before.get(), "from": from.get(), "at": at.get(),
                "turns": turns,
            }),
            Trim::Nothing { why } => serde_json::json!({"trimmed": false, "why": why}),
        }
    }
}

/// Why [`Journal::trim`] trimmed nothing. Nothing was written, except where
/// [`TrimError::Append`] says the store cannot tell.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrimError {
    /// A run of the session is live (in this journal, or under a live lease of another
    /// process): the trim would race the run's appends. Trim it through the run
    /// ([`Run::trim`](super::Run::trim)), or once it has ended. (A trim that lands beside a live
    /// run all the same, decided on a head read just before the run began, is folded by the
    /// run as another writer's event: it never fences the run.)
    #[error("cannot trim session `{session}`: its run `{run}` is live; trim it once the run ends")]
    Running {
        /// The session.
        session: SessionId,
        /// The live run.
        run: RunId,
    },
    /// Another actor appended to the session (or deleted it) between the trim's read and its
    /// append: nothing was written. Trim again.
    #[error(
        "cannot trim session `{session}`: it changed while the trim was decided (its tail was \
         {expected}, it is {actual}); nothing was written"
    )]
    Changed {
        /// The session.
        session: SessionId,
        /// The tail the trim read.
        expected: Seq,
        /// The tail now.
        actual: Seq,
    },
    /// The session could not be read.
    #[error("cannot read session `{session}` to trim it: {source}")]
    Read {
        /// The session.
        session: SessionId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The run that trims ([`Run::trim`](super::Run::trim)) could not append the `trimmed`
    /// event: refused, fenced, or the store failed (what became of the run is in the source).
    #[error("the run could not write the trim: {source}")]
    Run {
        /// The run's error.
        #[source]
        source: super::WriteError,
    },
    /// The `trimmed` event could not be appended. Nothing was written, unless the source is
    /// [`AppendError::OutcomeUnknown`]: read the session before trimming again.
    #[error("cannot write the trim of session `{session}`: {source}")]
    Append {
        /// The session.
        session: SessionId,
        /// The store's error.
        #[source]
        source: AppendError,
    },
}

impl Coded for TrimError {
    fn code(&self) -> ErrorCode {
        match self {
            TrimError::Running { .. } => ErrorCode::LeaseHeld,
            TrimError::Changed { .. } => ErrorCode::Conflict,
            TrimError::Read { source, .. } => source.code(),
            TrimError::Append { source, .. } => source.code(),
            TrimError::Run { source } => source.code(),
        }
    }
}

/// Trims `session` of `store` as [`Journal::trim`] does once it found no live run: reads the
/// log, decides the point ([`trim_point`]) and appends the `trimmed` event at the tail read.
pub(crate) async fn trim_store(
    store: &dyn JournalStore,
    session: &SessionId,
    keep_turns: usize,
    clock: &dyn Clock,
    durability: Durability,
) -> Result<Trim, TrimError> {
    let read = |source| TrimError::Read { session: session.clone(), source };
    let records = store.read_async(session, Seq(0)..Seq(u64::MAX)).await.map_err(read)?;
    let Some(tail) = records.last().map(|r| r.seq.next()) else {
        return Ok(Trim::Nothing { why: "the session has no events".into() });
    };
    let from = records.first().map_or(Seq(0), |r| r.seq);
    let (before, turns) = match trim_point(&records, keep_turns) {
        Ok(point) => point,
        Err(why) => return Ok(Trim::Nothing { why }),
    };
    let stamped = [Stamped::at(clock.now(), Event::Trimmed(Trimmed { before, turns }))];
    match store.append_async(session, tail, &stamped, durability).await {
        Ok(_) => Ok(Trim::Trimmed { before, from, at: tail, turns }),
        Err(AppendError::Conflict { expected, actual }) => {
            Err(TrimError::Changed { session: session.clone(), expected, actual })
        }
        Err(source) => Err(TrimError::Append { session: session.clone(), source }),
    }
}
