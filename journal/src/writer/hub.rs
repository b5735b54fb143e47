//! What a journal's runs report back to it: that one of them can no longer write (so its lease
//! is released and shutdown learns it), and the writer's own counters.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The writer's counters since the journal was made. Counters only grow.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) runs_begun: AtomicU64,
    pub(crate) fenced_writes_refused: AtomicU64,
    pub(crate) leases_taken_over: AtomicU64,
    pub(crate) leases_lost: AtomicU64,
}

impl Counters {
    pub(crate) fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// A change notice: a generation that moves on at each [`notify`](Hub::notify), waited for by
/// a thread (the lease keeper) or a task (shutdown).
#[derive(Debug, Default)]
pub(crate) struct Hub {
    state: Mutex<Notices>,
    changed: Condvar,
    pub(crate) counters: Counters,
}

#[derive(Debug, Default)]
struct Notices {
    generation: u64,
    /// Tasks waiting for the generation to move. Invariant: emptied at each notify.
    tasks: Vec<Waker>,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, Notices> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The generation now.
    pub(crate) fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Something changed: wakes the thread and the tasks waiting.
    pub(crate) fn notify(&self) {
        let tasks = {
            let mut state = self.lock();
            state.generation = state.generation.wrapping_add(1);
            std::mem::take(&mut state.tasks)
        };
        self.changed.notify_all();
        for waker in tasks {
            waker.wake();
        }
    }

    /// Blocks the calling thread until the generation moves past `seen` or `timeout` passes;
    /// returns the generation then.
    pub(crate) fn wait_thread(&self, seen: u64, timeout: Duration) -> u64 {
        let state = self.lock();
        let (state, _) = self
            .changed
            .wait_timeout_while(state, timeout, |s| s.generation == seen)
            .unwrap_or_else(|p| p.into_inner());
        state.generation
    }

    /// Resolves once the generation moves past `seen`.
    pub(crate) fn changed(&self, seen: u64) -> Changed<'_> {
        Changed { hub: self, seen }
    }
}

/// The future [`Hub::changed`] returns.
pub(crate) struct Changed<'a> {
    hub: &'a Hub,
    seen: u64,
}

impl Future for Changed<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.hub.lock();
        if state.generation != self.seen {
            return Poll::Ready(());
        }
        if !state.tasks.iter().any(|w| w.will_wake(cx.waker())) {
            state.tasks.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
