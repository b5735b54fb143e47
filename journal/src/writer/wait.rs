//! The sync API's wait: polls one of the writer's futures on the calling thread, parking it
//! between polls until the future's waker unparks it.
//!
//! Written here rather than taken from an executor crate because it must nest: a tool handler
//! the runtime drives with its own executor may call the writer's sync API, and an executor's
//! `block_on` refuses (panics) to run inside another. This one only parks the calling thread,
//! as [`StoreFuture::wait`](stepjournal_backends::StoreFuture::wait) does.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to its end on the calling thread, parking it between polls: the wait under
/// every sync method of the writer, for callers with no executor (a command-line tool, a
/// thread of a sync program). It nests: a future it runs may call it again (a tool handler
/// calling the sync API), which an executor's own `block_on` refuses. Do not call it from an
/// async task: it blocks the executor's thread until the future completes.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
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

#[cfg(test)]
mod tests {
    use stepjournal_backends::StoreFuture;

    use super::*;

    #[test]
    fn a_wait_returns_a_value_completed_on_another_thread() {
        let (future, completer) = StoreFuture::pending_or(0u32);
        let other = std::thread::spawn(move || completer.complete(7));
        assert_eq!(block_on(future), 7);
        assert!(other.join().is_ok(), "completing does not panic");
    }

    #[test]
    fn a_wait_nests_inside_another() {
        assert_eq!(block_on(async { block_on(async { 3 }) + 1 }), 4);
    }
}
