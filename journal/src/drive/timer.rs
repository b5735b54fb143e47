//! [`sleep`]: a future that resolves once a duration has passed, on any executor or none. One
//! thread (`stepjournal-timer`, started on the first use) keeps every pending deadline in
//! order and wakes each task when its time comes; a task waiting holds no thread.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The deadlines waited for, and the thread that fires them.
struct Timer {
    state: Mutex<Pending>,
    changed: Condvar,
}

#[derive(Default)]
struct Pending {
    next: u64,
    /// Deadlines in order; an id no longer in `waiting` was dropped (or fired) and is skipped.
    order: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The task to wake for each deadline still waited for. Invariant: every id here is in
    /// `order`.
    waiting: HashMap<u64, Waker>,
}

impl Timer {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The timer, its thread started on first use; `None` if no thread could be started (the
    /// deadlines then never fire).
    fn get() -> Option<&'static Timer> {
        static TIMER: OnceLock<Option<&'static Timer>> = OnceLock::new();
        *TIMER.get_or_init(|| {
            let timer: &'static Timer = Box::leak(Box::new(Timer {
                state: Mutex::new(Pending::default()),
                changed: Condvar::new(),
            }));
            let spawned = std::thread::Builder::new()
                .name("stepjournal-timer".into())
                .spawn(move || timer.run());
            spawned.is_ok().then_some(timer)
        })
    }

    /// Fires each deadline as its time comes.
    fn run(&self) {
        let mut pending = self.lock();
        loop {
            let now = Instant::now();
            let mut due = Vec::new();
            while let Some(Reverse((at, id))) = pending.order.peek().copied() {
                if at > now {
                    break;
                }
                pending.order.pop();
                if let Some(waker) = pending.waiting.remove(&id) {
                    due.push(waker);
                }
            }
            if !due.is_empty() {
                drop(pending);
                for waker in due {
                    waker.wake();
                }
                pending = self.lock();
                continue;
            }
            pending = match pending.order.peek().copied() {
                Some(Reverse((at, _))) => {
                    let wait = at.saturating_duration_since(now);
                    self.changed.wait_timeout(pending, wait).unwrap_or_else(|p| p.into_inner()).0
                }
                None => self.changed.wait(pending).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

/// Resolves once `after` has passed (see the [module](self)).
pub(crate) fn sleep(after: Duration) -> Sleep {
    Sleep { at: Instant::now().checked_add(after), id: None }
}

/// The future [`sleep`] returns. Dropped before it resolved, it leaves nothing behind.
pub(crate) struct Sleep {
    /// When it resolves; `None`: never (a duration too long to add).
    at: Option<Instant>,
    /// Its place in the timer, once it waits.
    id: Option<u64>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(at) = self.at else { return Poll::Pending };
        if Instant::now() >= at {
            return Poll::Ready(());
        }
        let Some(timer) = Timer::get() else { return Poll::Pending };
        let mut pending = timer.lock();
        match self.id {
            Some(id) => match pending.waiting.get_mut(&id) {
                Some(waker) => waker.clone_from(cx.waker()),
                // Fired between the check of the time above and the lock.
                None => return Poll::Ready(()),
            },
            None => {
                let id = pending.next;
                pending.next = pending.next.wrapping_add(1);
                pending.order.push(Reverse((at, id)));
                pending.waiting.insert(id, cx.waker().clone());
                self.id = Some(id);
                drop(pending);
                timer.changed.notify_one();
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let (Some(id), Some(timer)) = (self.id, Timer::get()) {
            // Its place in `order` is skipped when it comes up.
            timer.lock().waiting.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use super::*;

    #[test]
    fn a_sleep_never_resolves_before_its_time() {
        for ms in [0, 1, 30] {
            let started = Instant::now();
            crate::writer::block_on(sleep(Duration::from_millis(ms)));
            assert!(started.elapsed() >= Duration::from_millis(ms));
        }
    }

    #[test]
    fn a_later_sleep_made_first_does_not_hold_back_an_earlier_one() {
        let started = Instant::now();
        let mut long = Box::pin(sleep(Duration::from_secs(3_600)));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(long.as_mut().poll(&mut cx).is_pending());
        crate::writer::block_on(sleep(Duration::from_millis(5)));
        assert!(started.elapsed() >= Duration::from_millis(5));
        assert!(long.as_mut().poll(&mut cx).is_pending(), "the hour has not passed");
    }

    #[test]
    fn a_dropped_sleep_leaves_nothing_waiting() {
        let mut waiting = Box::pin(sleep(Duration::from_secs(3_600)));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        let id = waiting.id;
        let timer = Timer::get();
        assert!(timer.is_some_and(|t| id.is_some_and(|id| t.lock().waiting.contains_key(&id))));
        drop(waiting);
        assert!(timer.is_some_and(|t| id.is_some_and(|id| !t.lock().waiting.contains_key(&id))));
    }
}
