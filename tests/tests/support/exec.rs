//! A minimal executor: polls futures on the calling thread, parking it between wake-ups. Enough
//! to show a store's futures complete for a caller that is no tokio runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls every future until all are ready, on this thread; their outputs in order.
pub fn join_all<F: Future + Unpin>(mut futures: Vec<F>) -> Vec<F::Output> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    loop {
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none()
                && let Poll::Ready(value) = Pin::new(future).poll(&mut cx)
            {
                *output = Some(value);
            }
        }
        if outputs.iter().all(Option::is_some) {
            return outputs.into_iter().flatten().collect();
        }
        std::thread::park();
    }
}

/// Polls one future until it is ready, on this thread.
pub fn block_on<F: Future + Unpin>(future: F) -> F::Output {
    join_all(vec![future]).pop().unwrap()
}
