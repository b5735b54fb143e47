//! What one batch tells of its session's head ([`RunHead`]), read on open from its records: the
//! kind and time of each record come from its header; only `run_started` and `run_ended` payloads
//! are decoded (the run id and outcome the head holds). The head is then kept by the one rule,
//! [`RunHead::advance`], as on the append path. The place of the batch's last `snapshot` comes
//! from the record headers too (its payload is never decoded here).

use stepjournal_codec::batch::Frame;
use stepjournal_codec::record::RecordRef;
use stepjournal_codec::{
    ApprovalDecided, CallId, ClientAnswer, Event, EventKind, Limits, RawJson, UnixMillis,
};

use crate::{RunHead, RunState};

/// An event of a batch that the head rule reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeadEvent {
    /// The event, or a stand-in of the same kind for one whose payload the rule does not read.
    Event(Event),
    /// A record the head needs whose payload does not decode: the head is unknown until the
    /// next run begins or ends (the read that meets the record reports it).
    Unreadable,
}

/// What one batch tells of its session's head.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BatchHead {
    /// When its last event was appended.
    pub last_at: UnixMillis,
    /// The events the head rule reads, in order; `None` for the many batches with none.
    pub events: Option<Box<[HeadEvent]>>,
    /// Where its last `snapshot` record lies, counted from its first record (its seq minus the
    /// batch's first); `None` for a batch without one.
    pub snapshot: Option<u32>,
}

impl BatchHead {
    /// What a batch of one event of `kind`, appended at `at`, tells, when that is known without
    /// its payload (not for `run_started` and `run_ended`).
    pub(crate) fn of_one(kind: EventKind, at: UnixMillis) -> Option<BatchHead> {
        let events = match stand_in(kind) {
            Stand::Needless => None,
            Stand::In(event) => Some(vec![HeadEvent::Event(event)].into_boxed_slice()),
            Stand::Payload => return None,
        };
        let snapshot = (kind == EventKind::Snapshot).then_some(0);
        Some(BatchHead { last_at: at, events, snapshot })
    }

    /// Reads the records of the events frame `bytes` (a frame the walk checked).
    pub(crate) fn of_frame(bytes: &[u8], limits: &Limits) -> BatchHead {
        let mut head = BatchHead::default();
        let Ok((frame, _)) = Frame::parse(bytes, limits) else { return head };
        let mut events = Vec::new();
        for (k, r) in frame.records().enumerate() {
            let Ok(r) = r else {
                events.push(HeadEvent::Unreadable);
                break;
            };
            head.last_at = r.at;
            if r.kind == EventKind::Snapshot {
                head.snapshot = u32::try_from(k).ok();
            }
            let event = match stand_in(r.kind) {
                Stand::Needless => continue,
                Stand::In(event) => HeadEvent::Event(event),
                Stand::Payload => match r.event() {
                    Ok(e) => HeadEvent::Event(e),
                    Err(_) => HeadEvent::Unreadable,
                },
            };
            events.push(event);
        }
        if !events.is_empty() {
            head.events = Some(events.into_boxed_slice());
        }
        head
    }

    /// What the events frame `bytes` tells of its session's head, in the form a sidecar index
    /// stores: the time of its last record, the records the head rule reads ([`Stored`]) and
    /// where its last snapshot lies. [`BatchHead::of_stored`] turns it into what
    /// [`BatchHead::of_frame`] gives.
    pub(crate) fn stored_of_frame<'a>(bytes: &'a [u8], limits: &Limits) -> StoredHead<'a> {
        let mut out = StoredHead::default();
        let Ok((frame, _)) = Frame::parse(bytes, limits) else { return out };
        let StoredHead { last_at, stored: kept, snapshot } = &mut out;
        for (k, r) in frame.records().enumerate() {
            let Ok(r) = r else {
                kept.push(Stored::Unreadable);
                break;
            };
            *last_at = r.at;
            if r.kind == EventKind::Snapshot {
                *snapshot = u32::try_from(k).ok();
            }
            match (stand_in(r.kind), r.kind) {
                (Stand::Needless, _) => {}
                (Stand::In(_), EventKind::ClientAnswer) => kept.push(Stored::ClientAnswer),
                (Stand::In(_), EventKind::ApprovalDecided) => kept.push(Stored::ApprovalDecided),
                // Every other kind the rule reads is read from its payload.
                (Stand::In(_) | Stand::Payload, _) => kept.push(Stored::Record(r.bytes)),
            }
        }
        out
    }

    /// The batch head a sidecar index stored (see [`BatchHead::stored_of_frame`]): the time of
    /// its last record, the records the head rule reads, and where its last snapshot lies.
    pub(crate) fn of_stored(
        last_at: UnixMillis,
        stored: &[Stored<'_>],
        snapshot: Option<u32>,
        limits: &Limits,
    ) -> Self {
        if stored.is_empty() {
            return BatchHead { last_at, events: None, snapshot };
        }
        let events: Vec<HeadEvent> = stored
            .iter()
            .map(|s| match s {
                Stored::ClientAnswer => stand_in_event(EventKind::ClientAnswer),
                Stored::ApprovalDecided => stand_in_event(EventKind::ApprovalDecided),
                Stored::Unreadable => HeadEvent::Unreadable,
                Stored::Record(bytes) => match RecordRef::parse(bytes, limits) {
                    Ok((r, _)) => match stand_in(r.kind) {
                        Stand::In(e) => HeadEvent::Event(e),
                        _ => r.event().map_or(HeadEvent::Unreadable, HeadEvent::Event),
                    },
                    Err(_) => HeadEvent::Unreadable,
                },
            })
            .collect();
        let events = (!events.is_empty()).then(|| events.into_boxed_slice());
        BatchHead { last_at, events, snapshot }
    }

    /// A batch head telling only where the batch trims its session (verify, which keeps no
    /// heads, reads nothing else of it); the default for `None`.
    pub(crate) fn of_trim(trim: Option<u64>) -> BatchHead {
        let events = trim.map(|before| {
            let trimmed =
                stepjournal_codec::Trimmed { before: stepjournal_codec::Seq(before), turns: 0 };
            vec![HeadEvent::Event(Event::Trimmed(trimmed))].into_boxed_slice()
        });
        BatchHead { events, ..BatchHead::default() }
    }

    /// Where the batch trims its session: the `before` of its last `trimmed` event.
    pub(crate) fn trim(&self) -> Option<u64> {
        self.events.iter().flatten().rev().find_map(|e| match e {
            HeadEvent::Event(Event::Trimmed(t)) => Some(t.before.get()),
            _ => None,
        })
    }

    /// The session's head after this batch.
    pub(crate) fn apply(&self, head: &mut RunHead) {
        for e in self.events.iter().flatten() {
            match e {
                HeadEvent::Event(e) => head.advance(e),
                HeadEvent::Unreadable => {
                    head.run = RunState::Unknown;
                    head.answered_while_suspended = false;
                }
            }
        }
    }
}

/// What the head rule needs of an event of one kind.
enum Stand {
    /// Nothing: the rule does not read this kind.
    Needless,
    /// Only its kind: a stand-in of that kind serves.
    In(Event),
    /// Its payload (the run id, the outcome; a trim's `before`).
    Payload,
}

/// What a sidecar index stores of one events frame for its session's head
/// ([`BatchHead::stored_of_frame`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StoredHead<'a> {
    /// When its last record was appended.
    pub last_at: UnixMillis,
    /// The records the head rule reads, in order.
    pub stored: Vec<Stored<'a>>,
    /// Where its last `snapshot` record lies, counted from its first record.
    pub snapshot: Option<u32>,
}

/// A record of a batch the head rule reads, as a sidecar index stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored<'a> {
    /// A `client_answer` (its kind is all the rule reads).
    ClientAnswer,
    /// An `approval_decided` (its kind is all the rule reads).
    ApprovalDecided,
    /// A record whose payload the rule reads (`run_started`, `run_ended`), or opening does
    /// (`trimmed`): its bytes.
    Record(&'a [u8]),
    /// A record that does not decode.
    Unreadable,
}

fn stand_in_event(kind: EventKind) -> HeadEvent {
    match stand_in(kind) {
        Stand::In(e) => HeadEvent::Event(e),
        Stand::Needless | Stand::Payload => HeadEvent::Unreadable,
    }
}

fn stand_in(kind: EventKind) -> Stand {
    match kind {
        // A trim's payload is not the head's, but opening reads where it cut the log.
        EventKind::RunStarted | EventKind::RunEnded | EventKind::Trimmed => Stand::Payload,
        EventKind::ClientAnswer => Stand::In(Event::ClientAnswer(ClientAnswer {
            call: CallId::new(String::new()),
            output: RawJson::default(),
        })),
        EventKind::ApprovalDecided => Stand::In(Event::ApprovalDecided(ApprovalDecided {
            call: CallId::new(String::new()),
            approved: false,
        })),
        _ => Stand::Needless,
    }
}

#[cfg(test)]
mod tests {
    use stepjournal_codec::{Entry, Message, Role, RunEnded, RunId, RunOutcome, RunStarted};
    use stepjournal_codec::{Seq, SessionId, Stamped, batch};

    use super::*;

    fn frame(events: &[Event]) -> Vec<u8> {
        let stamped: Vec<Stamped> = events
            .iter()
            .enumerate()
            .map(|(i, e)| Stamped::at(UnixMillis(10 + i as u64), e.clone()))
            .collect();
        let mut bytes = Vec::new();
        batch::encode_into(
            &mut bytes,
            &SessionId::new("s").unwrap(),
            Seq(0),
            &stamped,
            &Limits::default(),
        )
        .unwrap();
        bytes
    }

    #[test]
    fn a_batch_read_back_moves_the_head_as_its_events_do_on_append() {
        let events = vec![
            Event::RunStarted(RunStarted { run: RunId::new("r1"), entry: Entry::Wake, by: None }),
            Event::Message(Message { role: Role::User, text: "hi".into() }),
            Event::RunEnded(RunEnded {
                run: RunId::new("r1"),
                outcome: RunOutcome::Suspended,
                error: None,
                by: None,
            }),
            Event::ClientAnswer(ClientAnswer {
                call: CallId::new("c1"),
                output: RawJson::parse("{\"seat\":\"12A\"}").unwrap(),
            }),
        ];
        let read = BatchHead::of_frame(&frame(&events), &Limits::default());
        assert_eq!(read.last_at, UnixMillis(13));
        assert_eq!(read.events.as_ref().map(|e| e.len()), Some(3), "the message is not kept");
        let (mut from_disk, mut on_append) = (RunHead::default(), RunHead::default());
        read.apply(&mut from_disk);
        for e in &events {
            on_append.advance(e);
        }
        assert_eq!(from_disk, on_append);
        assert!(from_disk.answered_while_suspended);
    }

    #[test]
    fn the_last_snapshot_s_place_is_read_alike_from_a_frame_a_sidecar_and_a_lone_header() {
        let snap = || {
            Event::from(stepjournal_codec::Snapshot {
                len: 0,
                run: None,
                run_end: None,
                reply: None,
                commit: None,
                committed: Vec::new(),
            })
        };
        let text = || Event::Message(Message { role: Role::User, text: "x".into() });
        let limits = Limits::default();
        for (events, place) in [
            (vec![text(), snap(), text(), snap(), text()], Some(3)),
            (vec![text(), text()], None),
            (vec![snap()], Some(0)),
        ] {
            let bytes = frame(&events);
            let read = BatchHead::of_frame(&bytes, &limits);
            assert_eq!(read.snapshot, place, "{events:?}");
            let stored = BatchHead::stored_of_frame(&bytes, &limits);
            assert_eq!(stored.snapshot, place);
            assert_eq!(
                BatchHead::of_stored(stored.last_at, &stored.stored, stored.snapshot, &limits),
                read
            );
            if let [one] = events.as_slice() {
                assert_eq!(BatchHead::of_one(one.kind(), read.last_at), Some(read));
            }
        }
    }

    #[test]
    fn a_batch_without_head_events_keeps_only_its_time() {
        let read = BatchHead::of_frame(
            &frame(&[Event::Message(Message { role: Role::User, text: "x".into() })]),
            &Limits::default(),
        );
        assert_eq!((read.last_at, read.events), (UnixMillis(10), None));
    }
}
