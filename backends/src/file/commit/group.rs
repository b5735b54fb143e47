//! Group commit: appenders queue their batches, each with the completer of the future its
//! caller awaits or waits on; one leader at a time writes the queued batches with one write and
//! (if any asked for it) one `fdatasync`, publishes them, and completes each request itself. No
//! thread is parked per waiting request: a waiting caller is woken by its own completion, so an
//! async append costs two handoffs (its task to the committer, the committer back to its task).
//! Completing wakes a waker or unparks a thread, which never blocks the leader; the wakes of a
//! group take the time its appenders need to come back anyway (the committer then waits for that
//! cohort, `cohort`).
//!
//! Who leads:
//! - a caller of the sync API that finds no leader writes the group holding its own request and
//!   answers itself (a lone appender is never handed off), then hands the leadership to the
//!   committer thread if anything is left to write or its group's appenders are expected back,
//!   or gives it up;
//! - otherwise the committer thread the store owns: it leads while requests keep coming, and
//!   before each group waits briefly for the cohort of the last one (`cohort`). An async caller
//!   never writes or syncs on its own task; it wakes the committer when no one leads.
//!
//! Invariants:
//! - One leader at a time (`State::leading`), so groups are written one after the other and a
//!   group is written only after the previous group's sync returned.
//! - A group is published to the index (acknowledged: visible to reads and tails) only after its
//!   write, and its sync when one was asked, succeeded; groups are published in the order they
//!   were written, and each is published before the next is taken, so the order of
//!   acknowledgements is the order on disk. Callers are answered after their group is published,
//!   and a group's callers before the next group is written.
//! - A failed write or sync fails that group's callers with the I/O error, poisons the store and
//!   fails every queued request; nothing is retried.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::task::Waker;
use std::time::Instant;

use super::queue::{GroupError, Request, RequestKind};
use super::room;
use super::segment::IoFailure;
use super::state::{Core, State, lock};
use super::write::write_frames;
use crate::file::index::BatchLoc;
use crate::file::options::FileOptions;
use crate::{AppendAck, AppendError, StoreError};

/// Who leads a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leader {
    /// A caller of the sync API: it writes one group, the one holding its own request.
    Caller,
    /// The committer thread: it leads until nothing is left to write.
    Committer,
}

/// Queues a request (under the same lock as its compare-and-set, so the queue's order is the
/// order the checks passed in). When no one leads, a caller that `may_lead` (the sync API)
/// writes the group itself before returning, and gets the answer of its request if that is
/// inline (an [append](Request::append) with no completer); otherwise the committer thread is
/// woken to.
pub(crate) fn submit(
    core: &Core,
    mut st: MutexGuard<'_, State>,
    request: Request,
    may_lead: bool,
) -> Option<Result<AppendAck, AppendError>> {
    // The check that admitted the request counted it in its session's pending tail.
    debug_assert!(
        st.pending.get(&request.session).is_some_and(|p| match request.kind {
            RequestKind::Events { first, count, .. } => {
                p.tail == first.saturating_add(u64::from(count))
            }
            RequestKind::Delete => p.tail == 0 && p.deleting,
        }),
        "a request is queued counted in its session's pending tail: {:?}",
        request.kind
    );
    st.line.pushed(request.frame.len() as u64);
    st.queue.push_back(request);
    if st.cohort.tracking() && st.cohort.arrival(Instant::now()) {
        core.cohort_back.notify_one();
    }
    if st.leading {
        st.check_leading();
        return None;
    }
    st.leading = true;
    if may_lead {
        st.check_leading();
        drop(st);
        lead(core, Leader::Caller)
    } else {
        st.committer = true;
        st.check_leading();
        drop(st);
        core.wake.notify_one();
        None
    }
}

/// The committer thread's life: it sleeps until the leadership is handed to it, leads until
/// nothing is left, and ends once the store stops with nothing queued.
pub(crate) fn run_committer(core: &Core) {
    loop {
        let mut st = lock(&core.state);
        while !st.committer && !st.stopping {
            st = core.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        if !st.committer {
            debug_assert!(st.queue.is_empty(), "a request was queued without a leader");
            return;
        }
        drop(st);
        let own = lead(core, Leader::Committer);
        debug_assert!(own.is_none(), "the committer has no request of its own");
    }
}

/// Gives up the leadership (with `state` held): nothing is left to write, and whoever comes
/// next is no returning cohort (a lone appender is never waited for). Everyone waiting for room
/// is called (the queue is empty), returned to be woken once the lock is let go.
fn go_idle(st: &mut State) -> Vec<Waker> {
    st.cohort.forget();
    st.leading = false;
    st.committer = false;
    st.check_leading();
    st.line.call_all()
}

/// Takes the next group from the queue: the requests queued now, up to `max_group_bytes` (a
/// single larger request goes alone). Returns the group and the waiters for room it called.
fn take_group(st: &mut State, options: &FileOptions) -> (Vec<Request>, Vec<Waker>) {
    let mut group = Vec::new();
    let mut bytes = 0u64;
    while let Some(r) = st.queue.front() {
        let len = r.frame.len() as u64;
        if !group.is_empty() && bytes + len > options.max_group_bytes {
            break;
        }
        bytes += len;
        if let Some(r) = st.queue.pop_front() {
            group.push(r);
        }
    }
    let called = st.line.taken(bytes, options.max_queued_bytes);
    (group, called)
}

/// Leads groups: a caller one, the committer until nothing is left. Returns the answer of the
/// caller's own request, when it is inline.
fn lead(core: &Core, who: Leader) -> Option<Result<AppendAck, AppendError>> {
    // Should a bug panic here, the guard fails what is queued instead of leaving it waiting.
    let mut guard = LeadGuard { core, armed: true };
    let mut own = None;
    loop {
        let group = {
            let mut st = lock(&core.state);
            if who == Leader::Committer {
                st = await_cohort(core, st);
            }
            let (group, called) = take_group(&mut st, &core.options);
            if group.is_empty() {
                let everyone = go_idle(&mut st);
                drop(st);
                room::wake(called);
                room::wake(everyone);
                break;
            }
            drop(st);
            room::wake(called);
            group
        };
        let (go_on, answer) = write_group(core, group, who);
        own = own.or(answer);
        if !go_on {
            break;
        }
    }
    guard.armed = false;
    own
}

/// Waits (the committer, holding the leadership) for the appenders of the last group to queue
/// again, as long as the cohort rule says they are worth waiting for.
fn await_cohort<'a>(core: &'a Core, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    // A full group, or appenders waiting for room: nothing to wait for.
    if st.line.queued() >= core.options.max_group_bytes || st.line.anyone_waiting() {
        return st;
    }
    while !st.stopping && st.poisoned.is_none() {
        let Some(left) = st.cohort.wait(Instant::now()) else { break };
        st.cohort.waiting = true;
        st = core.cohort_back.wait_timeout(st, left).unwrap_or_else(PoisonError::into_inner).0;
        st.cohort.waiting = false;
    }
    st
}

/// Writes one group, publishes it, decides who leads next, and answers the group's callers.
/// Returns whether this leader goes on to the next group, and the answer of the leading caller's
/// own request when it is inline.
fn write_group(
    core: &Core,
    group: Vec<Request>,
    who: Leader,
) -> (bool, Option<Result<AppendAck, AppendError>>) {
    let sync = group.iter().any(|r| r.sync);
    let outcome = match group.as_slice() {
        // A lone request's frame is written without a list of frames.
        [one] => write_frames(core, &[one.frame.as_slice()], sync),
        _ => {
            let frames: Vec<&[u8]> = group.iter().map(|r| r.frame.as_slice()).collect();
            write_frames(core, &frames, sync)
        }
    };
    let mut io = std::time::Duration::ZERO;

    let mut st = lock(&core.state);
    let mut failed = None;
    let mut purge = false;
    match outcome {
        Ok(w) => {
            io = w.took;
            let offsets = w.offsets(group.iter().map(|r| r.frame.len()));
            // A new segment is in the index already (`write_frames`): the one it sealed may be
            // worth compacting.
            if w.sealed {
                purge = true;
            }
            let mut appends = 0;
            for (req, offset) in group.iter().zip(offsets) {
                match req.kind {
                    RequestKind::Events { first, count, last_at, snapshot, trim } => {
                        let len = req.frame.len() as u32;
                        let run = BatchLoc { first, count, len, seg: w.seg, offset };
                        let head = req.head.clone();
                        let pushed = st.index.push(&req.session, run, last_at, head, snapshot);
                        if let Some(before) = trim {
                            st.index.trim(&req.session, before);
                            // What it dropped may make segments removable or worth compacting.
                            purge = true;
                        }
                        debug_assert!(pushed.is_ok(), "the compare-and-set admitted {run:?}");
                        // Gone once its last queued batch is published (one lookup: put back
                        // in the rare case a later batch of the session is still queued).
                        if let Some(p) = st.pending.remove(&req.session)
                            && p.tail != run.end()
                        {
                            st.pending.insert(Arc::clone(&req.session), p);
                        }
                        appends += 1;
                    }
                    RequestKind::Delete => {
                        st.index.delete(&req.session, w.seg);
                        if st.pending.get(&req.session).is_some_and(|p| p.tail == 0) {
                            st.pending.remove(&req.session);
                        }
                        purge = true;
                    }
                }
            }
            core.counters.appends.fetch_add(appends, Ordering::Relaxed);
            core.counters.max_group.fetch_max(group.len() as u64, Ordering::Relaxed);
        }
        Err(f) => {
            st.poisoned.get_or_insert_with(|| f.to_string());
            st.pending.clear();
            failed = Some(f);
        }
    }
    if purge && st.poisoned.is_none() {
        core.want_reclaim(&mut st);
    }
    st.cohort.answered(group.len(), io);
    let mut refused = Vec::new();
    let mut hand_off = false;
    let more = !st.queue.is_empty() || st.cohort.expected();
    let mut called = Vec::new();
    let go_on = if st.poisoned.is_some() {
        refused.extend(st.queue.drain(..));
        st.line.emptied();
        called = st.line.call_all();
        // The reclaim thread may have poisoned the store while this group was written.
        st.pending.clear();
        st.leading = false;
        st.committer = false;
        false
    } else if !more {
        called = go_idle(&mut st);
        false
    } else if who == Leader::Caller {
        // The caller's own request is in this group: it returns, and the committer writes the
        // rest (or waits for the group's appenders to come back).
        st.committer = true;
        hand_off = true;
        false
    } else {
        true
    };
    // A pending tail lives only while a request of its session is queued or being written (and a
    // poisoned store has none).
    debug_assert!(
        st.leading || st.pending.is_empty(),
        "no request is queued or being written, yet tails are pending: {:?}",
        st.pending
    );
    st.check_leading();
    let poison = st.check_poison().err();
    drop(st);
    room::wake(called);
    if hand_off {
        core.wake.notify_one();
    }
    let result = |f: &Option<IoFailure>| match f {
        None => Ok(()),
        Some(f) => Err(group_error(f)),
    };
    // The caller's own request is the group's first (it found the queue empty): the others are
    // woken first, its own completion wakes no one.
    let mut group = group.into_iter();
    let own = if who == Leader::Caller { group.next() } else { None };
    for req in group {
        let inline = req.finish(result(&failed));
        debug_assert!(inline.is_none(), "only the leading caller's own request is inline");
    }
    let answer = own.and_then(|own| own.finish(result(&failed)));
    fail_all(refused, poison.as_ref());
    (go_on, answer)
}

/// Fails requests that were queued when the store was poisoned.
fn fail_all(refused: Vec<Request>, poison: Option<&StoreError>) {
    let first_failure = match poison {
        Some(StoreError::Poisoned { first_failure }) => first_failure.as_str(),
        _ => "",
    };
    for req in refused {
        let first_failure = first_failure.to_owned();
        let inline = req.finish(Err(GroupError::Store(StoreError::Poisoned { first_failure })));
        debug_assert!(inline.is_none(), "a queued request is never the leader's own");
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

/// Fails everything queued if a leader unwinds: the store is poisoned (its state may be
/// half-updated) and no caller waits for a group that will not come.
struct LeadGuard<'a> {
    core: &'a Core,
    /// Whether the leader is still inside `lead` (not returned from it).
    armed: bool,
}

impl Drop for LeadGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut st = lock(&self.core.state);
        let first_failure = "a group commit leader panicked".to_owned();
        st.poisoned.get_or_insert(first_failure);
        st.pending.clear();
        st.leading = false;
        st.committer = false;
        let refused: Vec<Request> = st.queue.drain(..).collect();
        st.line.emptied();
        let called = st.line.call_all();
        st.check_leading();
        let poison = st.check_poison().err();
        drop(st);
        room::wake(called);
        fail_all(refused, poison.as_ref());
    }
}
