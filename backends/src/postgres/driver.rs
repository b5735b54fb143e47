//! The store's own runtime: a current-thread tokio runtime on one thread, driving the store's
//! connections and running its operations. A caller gets a [`StoreFuture`] the operation
//! completes, so it may await it from any executor or wait on it from a plain thread; no
//! caller's executor ever runs the driver's I/O.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use tokio::runtime::{Builder, Handle};
use tokio::sync::{Notify, oneshot};

use crate::StoreFuture;

/// Operations in flight, so that a closing store lets them finish.
#[derive(Debug, Default)]
struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

/// Counts one operation in flight while it lives.
struct Running(Arc<InFlight>);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// The runtime's handle and thread. Dropping it lets the operations in flight finish (each is
/// bounded by the store's timeouts), then stops the thread and closes every connection.
#[derive(Debug)]
pub(crate) struct Driver {
    handle: Handle,
    in_flight: Arc<InFlight>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Driver {
    /// Starts the runtime's thread.
    pub(crate) fn start() -> std::io::Result<Self> {
        let runtime = Builder::new_current_thread().enable_all().build()?;
        let handle = runtime.handle().clone();
        let in_flight = Arc::new(InFlight::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let waiting = Arc::clone(&in_flight);
        let thread = std::thread::Builder::new().name("stepjournal-postgres".to_owned()).spawn(
            move || {
                runtime.block_on(async move {
                    // Stopped, or the store went away without stopping: either way, finish.
                    let _ = stopped.await;
                    loop {
                        let idle = waiting.idle.notified();
                        if waiting.count.load(Ordering::Acquire) == 0 {
                            break;
                        }
                        idle.await;
                    }
                });
            },
        )?;
        Ok(Driver { handle, in_flight, stop: Some(stop), thread: Some(thread) })
    }

    /// Runs `operation` on the runtime; the returned future gives its output, or `on_drop` if the
    /// operation was dropped before finishing (it panicked).
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        on_drop: T,
        operation: impl Future<Output = T> + Send + 'static,
    ) -> StoreFuture<T> {
        let (future, done) = StoreFuture::pending_or(on_drop);
        self.in_flight.count.fetch_add(1, Ordering::AcqRel);
        let running = Running(Arc::clone(&self.in_flight));
        self.handle.spawn(async move {
            let _running = running;
            done.complete(operation.await);
        });
        future
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
