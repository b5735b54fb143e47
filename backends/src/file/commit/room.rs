//! Room in the committer's queue. The queue holds at most
//! [`max_queued_bytes`](crate::file::FileOptions::max_queued_bytes) of frames besides the group
//! being written (a frame larger than that goes alone, into an empty queue). An appender that
//! finds no room waits in line, in arrival order, *before* its compare-and-set: nothing of its
//! batch is queued or counted in its session's tail while it waits, so a caller that gives up
//! (drops its future) leaves nothing behind.
//!
//! The line is called as room is made: when the leader takes a group from the queue, the
//! waiters at the front whose frames fit are called (woken, their bytes promised to them); when
//! the leader goes idle, or the store is poisoned or stopped, everyone is. A called waiter
//! enters when the queue is empty or its frame fits; one that finds the room taken after all
//! goes back to the front. A newcomer enters only when no one waits uncalled and no append of
//! its own session waits at all (called or not): its batch comes after theirs, so appends of
//! one session made in turn (each future created after the one before) enter in that order
//! even when the earlier ones wait for room. No one waits
//! without a leader to call them: a newcomer waits only behind a queue with a leader, or behind
//! waiters, and a leader calls the whole line before it goes idle; a called waiter enters an
//! empty queue whatever was promised to others. So a waiter whose task is not polled (its
//! executor blocked, say, by a thread waiting in line through the sync API) holds no one up
//! for longer than the queue takes to empty.
//!
//! Called waiters of one session enter in the order they are polled: a caller that appends to a
//! session again before its earlier append is answered awaits them in order (the journal's
//! writers append one batch at a time). A waiter holds up newcomers of its own session until it
//! enters or leaves, whether or not it is polled: their batches cannot land before its own.
//!
//! Everything here is changed under the store's state lock; the wakers it returns are woken
//! after that lock is let go.

use std::collections::{BTreeMap, HashMap};
use std::task::Waker;

/// A place in line: the order of arrival.
pub(crate) type Ticket = u64;

/// A waiter not called yet.
#[derive(Debug)]
struct Seat {
    len: u64,
    session: Box<str>,
    waker: Waker,
}

/// A waiter called and not back yet.
#[derive(Debug)]
struct Called {
    len: u64,
    session: Box<str>,
}

/// The queue's room and the line of appenders waiting for it.
#[derive(Debug, Default)]
pub(crate) struct Line {
    /// Bytes of frames in the queue (the group being written is not the queue's).
    queued: u64,
    /// The most `queued` reached since the store opened.
    most: u64,
    /// Bytes promised to waiters called but not queued yet.
    promised: u64,
    /// Waiters not called yet, by ticket (so in arrival order).
    waiting: BTreeMap<Ticket, Seat>,
    /// Waiters called and not back yet.
    called: HashMap<Ticket, Called>,
    /// How many waiters (called or not) each session has in line.
    sessions: HashMap<Box<str>, usize>,
    next: Ticket,
}

impl Line {
    /// Bytes of frames in the queue.
    pub(crate) fn queued(&self) -> u64 {
        self.queued
    }

    /// The most bytes the queue held since the store opened.
    pub(crate) fn most(&self) -> u64 {
        self.most
    }

    /// Whether anyone waits for room (called or not).
    pub(crate) fn anyone_waiting(&self) -> bool {
        !self.waiting.is_empty() || !self.called.is_empty()
    }

    /// Whether a newcomer's frame of `len` bytes for `session` enters now: no one waits
    /// uncalled before it, no append of its session waits, and the queue is empty or the frame
    /// fits beside what is queued and promised.
    pub(crate) fn admits(&self, session: &str, len: u64, cap: u64) -> bool {
        self.waiting.is_empty()
            && !self.sessions.contains_key(session)
            && (self.queued == 0 || self.fits(len, cap))
    }

    fn fits(&self, len: u64, cap: u64) -> bool {
        self.queued.saturating_add(self.promised).saturating_add(len) <= cap
    }

    /// Puts a newcomer that was not admitted at the back of the line; `waker` is replaced when
    /// it looks again.
    pub(crate) fn join(&mut self, session: &str, len: u64, waker: Waker) -> Ticket {
        let ticket = self.next;
        self.next += 1;
        *self.sessions.entry(session.into()).or_default() += 1;
        self.waiting.insert(ticket, Seat { len, session: session.into(), waker });
        ticket
    }

    /// A waiter of `session` is out of line (it entered or left).
    fn out(&mut self, session: &str) {
        if let Some(count) = self.sessions.get_mut(session) {
            *count -= 1;
            if *count == 0 {
                self.sessions.remove(session);
            }
        }
    }

    /// A waiter looks again: whether it enters now (it then holds no place in line). A waiter
    /// not called keeps its place; one called enters if the queue is empty or its frame fits,
    /// else (a caller it did not wait behind filled the queue) it goes back to the front, its
    /// ticket older than every later waiter's. Either is woken through `waker` when called.
    pub(crate) fn enter(&mut self, ticket: Ticket, len: u64, cap: u64, waker: &Waker) -> bool {
        if let Some(seat) = self.waiting.get_mut(&ticket) {
            seat.waker.clone_from(waker);
            return false;
        }
        let Some(Called { len: promised, session }) = self.called.remove(&ticket) else {
            // Not in line (the store forgets a ticket once it entered).
            return true;
        };
        self.promised = self.promised.saturating_sub(promised);
        if self.queued == 0 || self.fits(len, cap) {
            self.out(&session);
            return true;
        }
        self.waiting.insert(ticket, Seat { len, session, waker: waker.clone() });
        false
    }

    /// A waiter gives up (its future was dropped): its place, or what was promised to it, goes
    /// to those behind it.
    pub(crate) fn leave(&mut self, ticket: Ticket, cap: u64) -> Vec<Waker> {
        if let Some(Called { len, session }) = self.called.remove(&ticket) {
            self.promised = self.promised.saturating_sub(len);
            self.out(&session);
        } else if let Some(seat) = self.waiting.remove(&ticket) {
            self.out(&seat.session);
        }
        self.call(cap)
    }

    /// A frame of `len` bytes is queued.
    pub(crate) fn pushed(&mut self, len: u64) {
        self.queued = self.queued.saturating_add(len);
        self.most = self.most.max(self.queued);
    }

    /// The leader took `len` bytes of frames from the queue for a group: those at the front of
    /// the line whose frames now fit are called.
    pub(crate) fn taken(&mut self, len: u64, cap: u64) -> Vec<Waker> {
        self.queued = self.queued.saturating_sub(len);
        self.call(cap)
    }

    /// The queue was emptied without a group (the store is poisoned).
    pub(crate) fn emptied(&mut self) {
        self.queued = 0;
    }

    /// Calls the front of the line while its frames fit (the first one always, if nothing is
    /// queued or promised: a frame larger than the room goes alone).
    pub(crate) fn call(&mut self, cap: u64) -> Vec<Waker> {
        let mut wakers = Vec::new();
        while let Some(len) = self.waiting.first_key_value().map(|(_, seat)| seat.len) {
            let alone = self.queued == 0 && self.promised == 0;
            if !alone && !self.fits(len, cap) {
                break;
            }
            let Some((ticket, Seat { len, session, waker })) = self.waiting.pop_first() else {
                break;
            };
            self.called.insert(ticket, Called { len, session });
            self.promised = self.promised.saturating_add(len);
            wakers.push(waker);
        }
        wakers
    }

    /// Calls everyone: the leader goes idle (the queue is empty, so everyone may enter), or the
    /// store is poisoned or stopping (everyone is told so).
    pub(crate) fn call_all(&mut self) -> Vec<Waker> {
        let waiting = std::mem::take(&mut self.waiting);
        let mut wakers = Vec::with_capacity(waiting.len());
        for (ticket, Seat { len, session, waker }) in waiting {
            self.called.insert(ticket, Called { len, session });
            self.promised = self.promised.saturating_add(len);
            wakers.push(waker);
        }
        wakers
    }
}

/// Wakes what a change of the line called, after the state lock is let go.
pub(crate) fn wake(wakers: Vec<Waker>) {
    for waker in wakers {
        waker.wake();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::completion::tests::CountingWaker;

    fn waker() -> (Arc<CountingWaker>, Waker) {
        let count = Arc::new(CountingWaker(AtomicUsize::new(0)));
        (Arc::clone(&count), Waker::from(count))
    }

    #[test]
    fn an_empty_queue_admits_any_frame_and_a_full_one_none() {
        let mut line = Line::default();
        assert!(line.admits("s", 1_000, 100), "a frame larger than the room goes alone");
        line.pushed(1_000);
        assert!(!line.admits("s", 1, 100));
        assert_eq!(line.most(), 1_000);
    }

    #[test]
    fn the_line_is_called_in_order_as_room_is_made() {
        let mut line = Line::default();
        line.pushed(100);
        let (a_count, a) = waker();
        let (b_count, b) = waker();
        let first = line.join("s", 60, a.clone());
        let second = line.join("s", 60, b.clone());
        assert!(!line.admits("s", 1, 100), "a newcomer waits behind the line");
        // Taking the group empties the queue: 100 bytes of room, the first waiter fits, the
        // second does not beside it.
        wake(line.taken(100, 100));
        assert_eq!(a_count.0.load(Ordering::SeqCst), 1);
        assert_eq!(b_count.0.load(Ordering::SeqCst), 0);
        assert!(!line.enter(second, 60, 100, &b), "not called, and the queue is promised");
        assert!(line.enter(first, 60, 100, &a));
        line.pushed(60);
        wake(line.taken(60, 100));
        assert_eq!(b_count.0.load(Ordering::SeqCst), 1);
        assert!(line.enter(second, 60, 100, &b));
        assert!(!line.anyone_waiting());
    }

    #[test]
    fn a_newcomer_waits_behind_a_called_waiter_of_its_session_only() {
        let mut line = Line::default();
        line.pushed(100);
        let (_, a) = waker();
        let first = line.join("a", 10, a.clone());
        wake(line.taken(100, 100));
        assert!(line.waiting.is_empty(), "called");
        assert!(line.admits("b", 10, 100), "another session's newcomer passes");
        assert!(!line.admits("a", 10, 100), "its own session's waits behind it");
        let (_, b) = waker();
        let later = line.join("a", 10, b.clone());
        assert!(line.enter(first, 10, 100, &a));
        assert!(!line.admits("a", 10, 100), "the later one still waits");
        wake(line.leave(later, 100));
        assert!(line.admits("a", 10, 100));
        assert!(!line.anyone_waiting());
    }

    #[test]
    fn a_waiter_that_leaves_hands_its_room_on() {
        let mut line = Line::default();
        line.pushed(100);
        let (_, a) = waker();
        let (b_count, b) = waker();
        let first = line.join("s", 80, a);
        let _second = line.join("s", 80, b);
        wake(line.taken(100, 100));
        assert_eq!(b_count.0.load(Ordering::SeqCst), 0, "only the first fits");
        wake(line.leave(first, 100));
        assert_eq!(b_count.0.load(Ordering::SeqCst), 1, "its promised room goes to the next");
    }

    #[test]
    fn a_called_waiter_finding_the_room_taken_goes_back_to_the_front() {
        let mut line = Line::default();
        line.pushed(50);
        let (_, a) = waker();
        let first = line.join("s", 60, a.clone());
        wake(line.call_all());
        // Someone filled the queue before the called waiter looked.
        line.pushed(50);
        assert!(!line.enter(first, 60, 100, &a));
        let (_, b) = waker();
        let later = line.join("s", 10, b);
        assert_eq!(line.waiting.keys().copied().collect::<Vec<_>>(), vec![first, later]);
    }
}
