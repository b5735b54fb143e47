//! The completion-based path: a store hands its caller a [`StoreFuture`] and completes it from
//! its committer once the work is done (for an append: once the batch is durable).
//!
//! A future is awaited by a task on any executor, or waited on by a thread
//! ([`StoreFuture::wait`]): the sync API is that wait on the same path. Nothing here needs an
//! executor: completing wakes the task's [`Waker`] or unparks the waiting thread, so no thread is
//! parked per waiting task.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread::Thread;

use crate::{AppendAck, AppendError};

/// What an append's future resolves to.
pub type AppendFuture = StoreFuture<Result<AppendAck, AppendError>>;

/// Who waits for a completion.
#[derive(Debug)]
enum Waiter {
    Nobody,
    Task(Waker),
    Thread(Thread),
}

impl Waiter {
    fn wake(self) {
        match self {
            Waiter::Nobody => {}
            Waiter::Task(waker) => waker.wake(),
            Waiter::Thread(thread) => thread.unpark(),
        }
    }
}

enum Slot<T> {
    /// Not completed yet. `on_drop` is what the future resolves to if its completer is dropped
    /// without completing.
    Waiting { waiter: Waiter, on_drop: Option<T> },
    /// Completed; the value not yet taken.
    Done(T),
    /// The value was handed out.
    Taken,
}

struct Shared<T> {
    slot: Mutex<Slot<T>>,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, Slot<T>> {
        // Every change of the slot is one assignment: a panic elsewhere cannot leave it torn.
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores `value` and wakes the waiter; a slot completed already keeps its first value.
    fn finish(&self, value: T) {
        let waiter = {
            let mut slot = self.lock();
            if !matches!(*slot, Slot::Waiting { .. }) {
                return;
            }
            match std::mem::replace(&mut *slot, Slot::Done(value)) {
                Slot::Waiting { waiter, .. } => waiter,
                _ => Waiter::Nobody,
            }
        };
        waiter.wake();
    }

    /// The value if it is there (taking it), registering no one.
    fn take_done(&self) -> Option<T> {
        let mut slot = self.lock();
        if !matches!(*slot, Slot::Done(_)) {
            return None;
        }
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Done(value) => Some(value),
            _ => None,
        }
    }

    /// The value if it is there (taking it), else registers `waiter` to be woken.
    fn take_or_wait(&self, waiter: Waiter) -> Option<T> {
        let mut slot = self.lock();
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Done(value) => Some(value),
            Slot::Waiting { on_drop, .. } => {
                *slot = Slot::Waiting { waiter, on_drop };
                None
            }
            // Polled again after it gave its value: it stays pending (the `Future` contract
            // leaves this to the implementation; it never gives a second value).
            Slot::Taken => None,
        }
    }
}

/// A value a store produces later: await it as a [`Future`], or block a thread on it with
/// [`wait`](Self::wait).
///
/// Dropping the future does not cancel the work: an append whose future is dropped may still
/// land. A future that has given its value stays pending if polled again.
#[must_use = "the store's answer comes through the future: await it or wait on it"]
pub struct StoreFuture<T> {
    inner: Inner<T>,
}

enum Inner<T> {
    Ready(Option<T>),
    Pending(Arc<Shared<T>>),
    /// A future of the store's own making: work that must wait before it can be handed to the
    /// committer (an append waiting for room in a bounded queue), then the completion.
    Deferred(Pin<Box<dyn Future<Output = T> + Send + Sync>>),
}

impl<T> fmt::Debug for StoreFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.inner {
            Inner::Ready(Some(_)) => "ready",
            Inner::Ready(None) => "taken",
            Inner::Pending(_) => "pending",
            Inner::Deferred(_) => "deferred",
        };
        f.debug_struct("StoreFuture").field("state", &state).finish()
    }
}

/// The committer's side of a [`StoreFuture`]: completes it, once.
pub struct Completer<T> {
    shared: Option<Arc<Shared<T>>>,
}

impl<T> fmt::Debug for Completer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer").field("completed", &self.shared.is_none()).finish()
    }
}

impl<T> StoreFuture<T> {
    /// A future that is ready at once with `value`.
    pub fn ready(value: T) -> Self {
        StoreFuture { inner: Inner::Ready(Some(value)) }
    }

    /// A future and its completer. If the completer is dropped without completing, the future
    /// resolves to `on_drop`, so a waiter never hangs on a committer that went away.
    pub fn pending_or(on_drop: T) -> (Self, Completer<T>) {
        let slot = Slot::Waiting { waiter: Waiter::Nobody, on_drop: Some(on_drop) };
        let shared = Arc::new(Shared { slot: Mutex::new(slot) });
        let future = StoreFuture { inner: Inner::Pending(Arc::clone(&shared)) };
        (future, Completer { shared: Some(shared) })
    }

    /// A future the store made itself: `future` is polled in place of a completion (it may end
    /// by awaiting one). What dropping it leaves is `future`'s to say.
    pub fn deferred(future: impl Future<Output = T> + Send + Sync + 'static) -> Self {
        StoreFuture { inner: Inner::Deferred(Box::pin(future)) }
    }

    /// A future completed by `work`, run on a thread of its own: for a call that reads or
    /// folds for long (opening a journal, listing every session's head), so an async caller's
    /// executor thread never does it. `lost` is the value if no thread can be started or the
    /// work panics. Dropping the future leaves the work to finish and its value unread.
    pub fn on_thread(name: &str, lost: T, work: impl FnOnce() -> T + Send + 'static) -> Self
    where
        T: Send + 'static,
    {
        let (future, completer) = StoreFuture::pending_or(lost);
        // When no thread can be started the completer is dropped with the work: `lost`.
        let _ = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || completer.complete(work()));
        future
    }

    /// Whether the value is there (a poll would be ready). A deferred future is not known to be
    /// ready until it is polled.
    pub fn is_ready(&self) -> bool {
        match &self.inner {
            Inner::Ready(value) => value.is_some(),
            Inner::Pending(shared) => matches!(*shared.lock(), Slot::Done(_)),
            Inner::Deferred(_) => false,
        }
    }

    /// Blocks the calling thread until the value is there, and returns it. This is how the sync
    /// API waits: on the same completion an async caller awaits.
    pub fn wait(self) -> T {
        let shared = match self.inner {
            Inner::Ready(Some(value)) => return value,
            // Only a poll takes a ready value, and `wait` consumes the future: a future made
            // ready cannot get here empty. Should it, it waits on nothing, like a second poll.
            Inner::Ready(None) => loop {
                std::thread::park();
            },
            Inner::Pending(shared) => shared,
            Inner::Deferred(future) => return block_on(future),
        };
        // A caller that wrote its own group finds its value there: no handle on its thread is
        // taken for it.
        if let Some(value) = shared.take_done() {
            return value;
        }
        loop {
            if let Some(value) = shared.take_or_wait(Waiter::Thread(std::thread::current())) {
                return value;
            }
            // An unpark that came early or spuriously only makes the loop look again.
            std::thread::park();
        }
    }
}

impl<T> Future for StoreFuture<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        // `StoreFuture` holds no self-references: it is `Unpin` whatever `T` is.
        let this = Pin::into_inner(self);
        match &mut this.inner {
            Inner::Ready(value) => match value.take() {
                Some(value) => Poll::Ready(value),
                None => Poll::Pending,
            },
            Inner::Pending(shared) => match shared.take_or_wait(Waiter::Task(cx.waker().clone())) {
                Some(value) => Poll::Ready(value),
                None => Poll::Pending,
            },
            Inner::Deferred(future) => future.as_mut().poll(cx),
        }
    }
}

/// Wakes a parked thread.
struct Unpark(Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to its end on the calling thread, parking it between polls: the wait of a
/// deferred [`StoreFuture`], and the one under every sync method of the journal's writer, for
/// callers with no executor (a command-line tool, a thread of a sync program).
///
/// Written here rather than taken from an executor crate because it must nest: a tool handler
/// the runtime drives with its own executor may call the sync API, and an executor's
/// `block_on` refuses (panics) to run inside another. This one only parks the calling thread.
/// Do not call it from an async task: it blocks the executor's thread until the future
/// completes.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        // A wake that came before the park, or a spurious unpark, only makes the loop poll
        // again.
        std::thread::park();
    }
}

impl<T> Unpin for StoreFuture<T> {}

impl<T> Completer<T> {
    /// Completes the future with `value` and wakes whoever waits on it.
    pub fn complete(mut self, value: T) {
        if let Some(shared) = self.shared.take() {
            shared.finish(value);
        }
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        let Some(shared) = self.shared.take() else { return };
        let waiter = {
            let mut slot = shared.lock();
            match &mut *slot {
                Slot::Waiting { on_drop, .. } => match on_drop.take() {
                    Some(value) => match std::mem::replace(&mut *slot, Slot::Done(value)) {
                        Slot::Waiting { waiter, .. } => waiter,
                        _ => Waiter::Nobody,
                    },
                    None => Waiter::Nobody,
                },
                _ => Waiter::Nobody,
            }
        };
        waiter.wake();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    /// A waker that counts its wakes (the file backend's line tests use it too).
    pub(crate) struct CountingWaker(pub(crate) AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll_once<T>(future: &mut StoreFuture<T>, waker: &Arc<CountingWaker>) -> Poll<T> {
        let waker = Waker::from(Arc::clone(waker));
        Pin::new(future).poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_ready_future_gives_its_value_at_the_first_poll() {
        let waker = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let mut future = StoreFuture::ready(7);
        assert_eq!(poll_once(&mut future, &waker), Poll::Ready(7));
        assert_eq!(poll_once(&mut future, &waker), Poll::Pending, "a value is given once");
    }

    #[test]
    fn completing_wakes_the_task_that_polled_and_the_next_poll_is_ready() {
        let waker = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let (mut future, completer) = StoreFuture::pending_or(0);
        assert_eq!(poll_once(&mut future, &waker), Poll::Pending);
        assert!(!future.is_ready());
        completer.complete(42);
        assert_eq!(waker.0.load(Ordering::SeqCst), 1, "the completer woke the task once");
        assert!(future.is_ready());
        assert_eq!(poll_once(&mut future, &waker), Poll::Ready(42));
    }

    #[test]
    fn a_dropped_completer_resolves_the_future_with_its_fallback() {
        let waker = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let (mut future, completer) = StoreFuture::pending_or("the committer went away");
        assert_eq!(poll_once(&mut future, &waker), Poll::Pending);
        drop(completer);
        assert_eq!(waker.0.load(Ordering::SeqCst), 1);
        assert_eq!(poll_once(&mut future, &waker), Poll::Ready("the committer went away"));
    }

    #[test]
    fn a_thread_waits_for_a_completion_made_on_another_thread() {
        let (future, completer) = StoreFuture::pending_or(0u64);
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            started_tx.send(()).unwrap();
            future.wait()
        });
        started_rx.recv().unwrap();
        completer.complete(99);
        assert_eq!(waiter.join().unwrap(), 99);
    }

    #[test]
    fn a_completion_before_the_wait_is_found_at_once() {
        let (future, completer) = StoreFuture::pending_or(0u8);
        completer.complete(5);
        assert_eq!(future.wait(), 5);
    }
}
