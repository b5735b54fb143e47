//! Answering the callers of written groups on the store's answer thread: the leader hands it a
//! group's answers and goes on to the next group while the callers are woken (a wake of a
//! blocked thread costs microseconds; a group of many would otherwise hold the next one back).
//! Answers are given in the order they were handed over, so groups are answered in the order
//! they were written.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::queue::{GroupError, Request};

/// A request and how its group went.
pub(crate) type Answer = (Request, Result<(), GroupError>);

/// The answers waiting for the answer thread.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    queue: Mutex<Pending>,
    /// What the answer thread sleeps on. It is the only thread that waits on it.
    ready: Condvar,
}

#[derive(Debug, Default)]
struct Pending {
    answers: Vec<Answer>,
    /// Whether the answer thread sleeps (so a hand-over must wake it).
    sleeping: bool,
    /// The store is being dropped: the thread gives what is pending, then ends.
    stopping: bool,
    /// The thread is gone (it ended, or panicked): answers are given where they are handed over.
    gone: bool,
}

impl Answers {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // Every change under this lock is one push or one swap: a panic cannot leave it torn.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands answers to the answer thread.
    pub(crate) fn give(&self, answers: Vec<Answer>) {
        if answers.is_empty() {
            return;
        }
        let mut q = self.lock();
        if q.gone {
            drop(q);
            answers.into_iter().for_each(|(req, r)| req.finish(r));
            return;
        }
        q.answers.extend(answers);
        let wake = q.sleeping;
        drop(q);
        if wake {
            self.ready.notify_one();
        }
    }

    /// The answer thread's life: gives answers as they come, until the store stops.
    pub(crate) fn run(&self) {
        let mut guard = Gone { answers: self, armed: true };
        let mut batch = Vec::new();
        loop {
            {
                let mut q = self.lock();
                debug_assert!(!q.gone, "the answer thread runs until it is gone, and runs once");
                while q.answers.is_empty() && !q.stopping {
                    q.sleeping = true;
                    q = self.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
                    q.sleeping = false;
                }
                if q.answers.is_empty() {
                    q.gone = true;
                    break;
                }
                std::mem::swap(&mut batch, &mut q.answers);
            }
            for (req, r) in batch.drain(..) {
                req.finish(r);
            }
        }
        guard.armed = false;
    }

    /// Asks the answer thread to end once everything handed to it is given.
    pub(crate) fn stop(&self) {
        self.lock().stopping = true;
        self.ready.notify_one();
    }
}

/// Should the answer thread unwind, what is pending is given here, and later answers where they
/// are handed over: no caller waits for an answer that will not come.
struct Gone<'a> {
    answers: &'a Answers,
    armed: bool,
}

impl Drop for Gone<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let pending = {
            let mut q = self.answers.lock();
            q.gone = true;
            std::mem::take(&mut q.answers)
        };
        pending.into_iter().for_each(|(req, r)| req.finish(r));
    }
}
