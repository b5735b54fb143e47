//! [`CancelSignal`]: how a run tells its bodies to stop.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Fires once a run can no longer write: it was fenced (a newer run began, a `stop` landed,
/// its lease was taken over), it ended, or a store failure broke it. A body's writes are
/// refused from then on, so a tool that sees it should stop its work.
///
/// Cheap to clone; every clone sees the same signal. Check it
/// ([`is_cancelled`](Self::is_cancelled)) or await it ([`cancelled`](Self::cancelled)); it
/// never un-fires.
#[derive(Clone, Default)]
pub struct CancelSignal {
    inner: Arc<Signal>,
}

#[derive(Default)]
struct Signal {
    fired: AtomicBool,
    /// The tasks awaiting it. Invariant: emptied when it fires, never added to after.
    waiters: Mutex<Vec<Waker>>,
}

impl fmt::Debug for CancelSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelSignal").field("cancelled", &self.is_cancelled()).finish()
    }
}

impl CancelSignal {
    /// A signal that has not fired.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether it fired.
    pub fn is_cancelled(&self) -> bool {
        self.inner.fired.load(Ordering::Acquire)
    }

    /// Resolves once it fires (at once if it has).
    pub fn cancelled(&self) -> Cancelled {
        Cancelled { signal: self.clone() }
    }

    /// Fires it, waking every task awaiting it. Firing again does nothing.
    pub fn fire(&self) {
        let wakers = {
            let mut waiters = self.inner.waiters.lock().unwrap_or_else(|p| p.into_inner());
            if self.inner.fired.swap(true, Ordering::AcqRel) {
                return;
            }
            std::mem::take(&mut *waiters)
        };
        for waker in wakers {
            waker.wake();
        }
    }
}

/// The future [`CancelSignal::cancelled`] returns.
#[derive(Debug)]
#[must_use = "a future does nothing unless awaited"]
pub struct Cancelled {
    signal: CancelSignal,
}

impl Future for Cancelled {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let inner = &self.signal.inner;
        if inner.fired.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        let mut waiters = inner.waiters.lock().unwrap_or_else(|p| p.into_inner());
        // Checked again under the lock `fire` takes: a fire between the first check and here
        // has emptied the list and must not be missed.
        if inner.fired.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
            waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_task_awaiting_the_signal_is_woken_once_when_it_fires() {
        let signal = CancelSignal::new();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut waiting = signal.cancelled();
        assert_eq!(Pin::new(&mut waiting).poll(&mut cx), Poll::Pending);
        assert_eq!(Pin::new(&mut waiting).poll(&mut cx), Poll::Pending, "registered once");
        assert!(!signal.is_cancelled());
        signal.clone().fire();
        signal.fire();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(signal.is_cancelled());
        assert_eq!(Pin::new(&mut waiting).poll(&mut cx), Poll::Ready(()));
        assert_eq!(Pin::new(&mut signal.cancelled()).poll(&mut cx), Poll::Ready(()));
    }
}
