//! Group commit: appenders queue their batches; one of them, the leader, writes every queued
//! batch with one write and (if any asked for it) one `fdatasync`, then wakes each appender of
//! the group through its own slot and hands the leadership to the first appender still queued.
//!
//! Invariants:
//! - One leader at a time (`State::leading`), so groups are written one after the other and a
//!   group is written only after the previous group's sync returned.
//! - A group is published to the index (acknowledged) only after its write, and its sync when
//!   one was asked, succeeded; groups are published in the order they were written, so the order
//!   of acknowledgements is the order on disk.
//! - A failed write or sync fails that group's callers with the I/O error, poisons the store and
//!   fails every queued request; nothing is retried.

use std::sync::Arc;
use std::sync::MutexGuard;
use std::sync::atomic::Ordering;

use super::index::BatchLoc;
use super::queue::{GroupError, Request, RequestKind, Wake};
use super::reclaim::reclaim;
use super::segment::IoFailure;
use super::state::{Core, State, lock};
use super::write::write_frames;
use crate::StoreError;

/// Writes one group: the requests queued now (up to the group size). Called by the one
/// leader; hands the leadership on before waking the group's callers.
pub(crate) fn lead(core: &Core) {
    let group: Vec<Request> = {
        let mut st = lock(&core.state);
        let mut group = Vec::new();
        let mut bytes = 0u64;
        while let Some(r) = st.queue.front() {
            let len = r.frame.len() as u64;
            if !group.is_empty() && bytes + len > core.options.max_group_bytes {
                break;
            }
            bytes += len;
            if let Some(r) = st.queue.pop_front() {
                group.push(r);
            }
        }
        group
    };
    let outcome = if group.is_empty() {
        None
    } else {
        let frames: Vec<&[u8]> = group.iter().map(|r| r.frame.as_slice()).collect();
        Some(write_frames(core, &frames, group.iter().any(|r| r.sync)))
    };

    let mut st = lock(&core.state);
    let mut results: Vec<Result<(), GroupError>> = Vec::with_capacity(group.len());
    let mut purge = false;
    match outcome {
        None => {}
        Some(Ok(w)) => {
            if let Some(file) = w.new_segment {
                st.index.add_segment(w.seg, file);
                st.active = Some(w.seg);
                purge = true;
            }
            let mut appends = 0;
            for (req, offset) in group.iter().zip(&w.offsets) {
                match req.kind {
                    RequestKind::Events { first, count } => {
                        let len = req.frame.len() as u32;
                        let run = BatchLoc { first, count, len, seg: w.seg, offset: *offset };
                        let pushed = st.index.push(&req.session, run);
                        debug_assert!(pushed.is_ok(), "the compare-and-set admitted {run:?}");
                        if st.pending.get(&req.session) == Some(&run.end()) {
                            st.pending.remove(&req.session);
                        }
                        appends += 1;
                    }
                    RequestKind::Delete => {
                        st.index.delete(&req.session, w.seg);
                        if st.pending.get(&req.session) == Some(&0) {
                            st.pending.remove(&req.session);
                        }
                        purge = true;
                    }
                }
                results.push(Ok(()));
            }
            core.counters.appends.fetch_add(appends, Ordering::Relaxed);
        }
        Some(Err(f)) => {
            st.poisoned.get_or_insert_with(|| f.to_string());
            st.pending.clear();
            results.extend(group.iter().map(|_| Err(group_error(&f))));
        }
    }
    if purge && st.poisoned.is_none() {
        drop(st);
        let purged = reclaim(core);
        st = lock(&core.state);
        if let Err(f) = purged {
            st.poisoned.get_or_insert_with(|| f.to_string());
            st.pending.clear();
        }
    }
    let mut refused = Vec::new();
    let next = if st.poisoned.is_some() {
        refused.extend(st.queue.drain(..));
        st.leading = false;
        None
    } else if let Some(r) = st.queue.front() {
        Some(Arc::clone(&r.slot))
    } else {
        st.leading = false;
        None
    };
    // A pending tail lives only while a request of its session is queued or being written (and a
    // poisoned store has none).
    debug_assert!(
        st.leading || st.pending.is_empty(),
        "no request is queued or being written, yet tails are pending: {:?}",
        st.pending
    );
    let poison = st.check_poison().err();
    drop(st);
    if let Some(next) = next {
        next.lead();
    }
    for (req, result) in group.iter().zip(results) {
        req.slot.finish(result);
    }
    for req in refused {
        let first_failure = match &poison {
            Some(StoreError::Poisoned { first_failure }) => first_failure.clone(),
            _ => String::new(),
        };
        req.slot.finish(Err(GroupError::Store(StoreError::Poisoned { first_failure })));
    }
}

/// Queues a request (under the same lock as its compare-and-set, so the queue's order is the
/// order the checks passed in) and waits for its group; the caller leads when no one is.
pub(crate) fn submit(
    core: &Core,
    mut st: MutexGuard<'_, State>,
    request: Request,
) -> Result<(), GroupError> {
    let slot = Arc::clone(&request.slot);
    st.queue.push_back(request);
    if st.leading {
        drop(st);
    } else {
        st.leading = true;
        drop(st);
        lead(core);
    }
    loop {
        match slot.wait() {
            Wake::Lead => lead(core),
            Wake::Done(result) => return result,
        }
    }
}

/// What each caller of a group that failed with `f` is told.
fn group_error(f: &IoFailure) -> GroupError {
    if f.may_have_landed {
        let source = std::io::Error::new(f.source.kind(), f.source.to_string());
        GroupError::Unknown { context: f.context.clone(), source }
    } else {
        GroupError::Store(f.to_store_error())
    }
}
