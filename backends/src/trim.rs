//! Trims: a batch holding a `trimmed` event drops its session's events before the event's
//! `before`, in the same atomic step that lands the batch ([`JournalStore`](crate::JournalStore)'s
//! contract). Every backend finds the point by [`trim_point`].

use stepjournal_codec::{EncodeError, Event, Seq, SessionId, Stamped};

use crate::AppendError;

/// Where a batch appended at `expected` trims its session: the `before` of its last `trimmed`
/// event (`None` for a batch without one, or one keeping everything, `before` 0). A `before`
/// at or past `expected` is refused before anything is written: a trim keeps a seq the session
/// already holds.
pub fn trim_point(
    session: &SessionId,
    expected: Seq,
    events: &[Stamped],
) -> Result<Option<Seq>, AppendError> {
    let Some(before) = events.iter().rev().find_map(|e| match &e.event {
        Event::Trimmed(t) => Some(t.before),
        _ => None,
    }) else {
        return Ok(None);
    };
    if before >= expected {
        return Err(AppendError::Encode {
            session: session.clone(),
            source: Box::new(EncodeError::TrimPoint {
                before: before.get(),
                first: expected.get(),
            }),
        });
    }
    Ok((before > Seq(0)).then_some(before))
}
