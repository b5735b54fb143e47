//! A long fold on an async caller's task gives its executor back now and then.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// How many records a fold of a whole log on an async caller's task applies between yields.
pub(crate) const YIELD_EVERY: usize = 4096;

/// How many records an entry's fold after its snapshot applies between yields, when it has
/// more than that to fold (a snapshot's suffix is about 32 steps).
pub(crate) const FOLD_SLICE: usize = 64;

/// Ready on its second poll: the task is woken at once and queued behind the executor's other
/// work (its timers, its other tasks). Names no executor.
pub(crate) fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

#[derive(Debug)]
pub(crate) struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
