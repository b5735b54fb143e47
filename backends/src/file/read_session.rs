//! A session's records read from the segments the index names, under the index's lock for
//! the choice of range and batches (for the sync reads and the store's reading threads alike).

use std::ops::Range;
use std::sync::Arc;

use stepjournal_codec::{DecodeError, Record, SessionId};

use super::commit::state::{Core, lock};
use super::index::{BatchLoc, SessionLog};
use super::open::{OpenedStore, open};
use super::read::{ReadFailure, read_batches};
use crate::{OpenError, StoreError};

/// The session's events in the range `pick` chooses from its index entry, in order. The
/// range is chosen under the same lock as the batches it covers are looked up, so a
/// deletion (or a new snapshot) between the two cannot mix two states of a session.
pub(crate) fn read_where(
    core: &Core,
    session: &SessionId,
    pick: impl Fn(&SessionLog) -> Range<u64>,
) -> Result<Vec<Record>, StoreError> {
    /// How many times a read starts again after compaction removed a segment it was about
    /// to read (its batches are then elsewhere: the index says where, or, for a read-only
    /// store, the directory read again).
    const RETRIES: u32 = 8;
    let mut tries = 0;
    loop {
        let (range, runs): (Range<u64>, Vec<BatchLoc>) = {
            let st = lock(&core.state);
            st.check_open()?;
            let Some(log) = st.index.sessions.get(session.as_str()) else {
                return Ok(Vec::new());
            };
            let range = pick(log);
            let runs = log.overlapping(range.start, range.end);
            // A session's runs mostly lie in one segment: each is looked up once per stretch.
            let mut seen = None;
            let missing = runs.iter().find(|r| {
                let known = seen == Some(r.seg) || st.index.segments.contains_key(&r.seg);
                seen = Some(r.seg);
                !known
            });
            if let Some(run) = missing {
                return Err(StoreError::Corrupt {
                    context: format!("session {session} seq {}", run.first),
                    source: DecodeError::Malformed {
                        reason: format!("segment {} is missing", run.seg),
                    },
                });
            }
            (range, runs.to_vec())
        };
        let events: u64 = runs.iter().map(|r| u64::from(r.count)).sum();
        let wanted = events.min(range.end.saturating_sub(range.start));
        // Sized once: the records the runs hold within the range (a damaged journal may
        // claim more than it holds: at most 4096 ahead).
        let mut out = Vec::with_capacity(usize::try_from(wanted.min(4096)).unwrap_or(0));
        let read = read_batches(
            &core.dir,
            &core.files,
            &core.options.limits,
            session.as_str(),
            &runs,
            |_, r, _| {
                if range.contains(&r.seq.get()) {
                    out.push(r.to_record()?);
                }
                Ok(())
            },
        );
        match read {
            Ok(()) => return Ok(out),
            Err(ReadFailure::Store(e)) => return Err(e),
            Err(ReadFailure::Gone { .. }) if tries < RETRIES => {
                tries += 1;
                if core.options.read_only {
                    read_directory_again(core)?;
                }
            }
            Err(ReadFailure::Gone { seg, source }) => {
                let path = core.dir.join(seg.file_name());
                let context = format!(
                    "opening segment {}: it was removed each time it was about to be read \
                     (compaction by a writer moving batches faster than they are read)",
                    path.display()
                );
                return Err(StoreError::Io { context, source });
            }
        }
    }
}

/// A read-only store reads the directory again, as a new open would, and holds the journal
/// as it is now: its writer removed a segment this store had not kept open (compaction moved
/// that segment's batches to a segment this store did not know).
fn read_directory_again(core: &Core) -> Result<(), StoreError> {
    let fresh = match open(Arc::clone(&core.io), &core.dir, core.options) {
        Ok(OpenedStore { core, .. }) => core,
        Err(OpenError::Store(e)) => return Err(e),
        Err(other) => {
            let context = format!("reading the journal directory {} again", core.dir.display());
            return Err(StoreError::Io {
                context,
                source: std::io::Error::other(other.to_string()),
            });
        }
    };
    let Core { state, files, .. } = fresh;
    let index = state.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).index;
    lock(&core.state).index = index;
    core.files.adopt(files);
    Ok(())
}
