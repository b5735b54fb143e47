//! The threads a store on this machine reads on for an async caller: a read of the disk (a long
//! log, a cold cache, a database file) never runs on the caller's executor thread, and no read
//! starts a thread of its own.
//!
//! A small pool: a thread is started when a read finds none idle (at most [`MAX_THREADS`]), and
//! stops once it has had nothing to do for [`IDLE`], or when the store is dropped and the reads
//! queued before are done. A read whose future was dropped still runs; its value goes unread.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::{StoreError, StoreFuture};

/// The most threads one store reads on at once.
pub(crate) const MAX_THREADS: usize = 4;

/// How long a reading thread waits for work before it stops.
pub(crate) const IDLE: Duration = Duration::from_secs(2);

type Job = Box<dyn FnOnce() + Send>;

/// A store's reading threads. Dropping it lets them finish what is queued and stop.
pub(crate) struct Readers {
    pool: Arc<Pool>,
}

impl std::fmt::Debug for Readers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = self.pool.queue();
        f.debug_struct("Readers")
            .field("name", &self.pool.name)
            .field("threads", &q.threads)
            .field("queued", &q.jobs.len())
            .finish()
    }
}

struct Pool {
    /// The threads' name.
    name: String,
    queue: Mutex<Queue>,
    /// Signalled when a job is queued or the pool closes.
    work: Condvar,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// Threads running.
    threads: usize,
    /// Threads waiting for a job, or started and not yet looking for one.
    idle: usize,
    /// The store was dropped: threads stop once the queue is empty.
    closed: bool,
}

impl Readers {
    /// A pool whose threads are named `name`; none is started until a read needs one.
    pub(crate) fn new(name: &str) -> Readers {
        let pool = Pool { name: name.to_owned(), queue: Mutex::default(), work: Condvar::new() };
        Readers { pool: Arc::new(pool) }
    }

    /// `work` on one of the pool's threads; the future completes with its value, or with
    /// `lost` if no thread could be started or `work` panicked.
    pub(crate) fn read<T: Send + 'static>(
        &self,
        lost: T,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> StoreFuture<T> {
        let (future, completer) = StoreFuture::pending_or(lost);
        let mut q = self.pool.queue();
        if q.closed {
            // Dropped with its completer: the future has `lost`.
            return future;
        }
        q.jobs.push_back(Box::new(move || completer.complete(work())));
        if q.jobs.len() <= q.idle {
            // An idle thread takes it (each idle thread takes one of the jobs queued).
            self.pool.work.notify_one();
        } else if q.threads < MAX_THREADS {
            let pool = Arc::clone(&self.pool);
            let started = std::thread::Builder::new()
                .name(self.pool.name.clone())
                .spawn(move || pool.serve());
            match started {
                // Counted idle until it starts: it takes a job queued meanwhile, so the next
                // read does not start another for it.
                Ok(_) => {
                    q.threads += 1;
                    q.idle += 1;
                }
                // A running thread takes the job in turn; with none, dropping the job drops its
                // completer: the future has `lost`.
                Err(_) if q.threads == 0 => drop(q.jobs.pop_back()),
                Err(_) => {}
            }
        }
        future
    }

    /// `work` over `state` on one of the threads, unless `open` (the store's check that it is
    /// neither closed nor poisoned) refuses it at once. Should its thread be lost, the future
    /// has an I/O error whose context is `context`: what was read, and where.
    pub(crate) fn read_with<S, T>(
        &self,
        state: &Arc<S>,
        open: Result<(), StoreError>,
        context: String,
        work: impl FnOnce(&S) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<Result<T, StoreError>>
    where
        S: Send + Sync + 'static,
        T: Send + 'static,
    {
        if let Err(e) = open {
            return StoreFuture::ready(Err(e));
        }
        let state = Arc::clone(state);
        let source = std::io::Error::other("the thread reading it stopped before it answered");
        self.read(Err(StoreError::Io { context, source }), move || work(&state))
    }

    /// Threads running now (for tests).
    #[cfg(test)]
    pub(crate) fn threads(&self) -> usize {
        self.pool.queue().threads
    }
}

impl Readers {
    /// Lets the threads finish what is queued and stop; a read asked later has its `lost`
    /// value at once.
    pub(crate) fn close(&self) {
        self.pool.queue().closed = true;
        self.pool.work.notify_all();
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        self.close();
    }
}

impl Pool {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A thread's life: jobs until the queue is empty and closed, or empty for [`IDLE`].
    fn serve(&self) {
        let mut q = self.queue();
        q.idle -= 1;
        loop {
            if let Some(job) = q.jobs.pop_front() {
                drop(q);
                // A panicking job drops its completer (its future has `lost`); the thread
                // goes on.
                let _ = catch_unwind(AssertUnwindSafe(job));
                q = self.queue();
                continue;
            }
            if q.closed {
                break;
            }
            q.idle += 1;
            let (back, waited) =
                self.work.wait_timeout(q, IDLE).unwrap_or_else(PoisonError::into_inner);
            q = back;
            q.idle -= 1;
            if waited.timed_out() && q.jobs.is_empty() {
                break;
            }
        }
        q.threads -= 1;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn reads_run_off_the_calling_thread_and_complete() {
        let readers = Readers::new("test-reader");
        let caller = std::thread::current().id();
        let futures: Vec<_> = (0..32)
            .map(|i| readers.read(None, move || Some((i, std::thread::current().id()))))
            .collect();
        for (i, f) in futures.into_iter().enumerate() {
            let (n, on) = f.wait().unwrap();
            assert_eq!(n, i);
            assert_ne!(on, caller);
        }
        assert!(readers.threads() <= MAX_THREADS);
    }

    #[test]
    fn a_panicking_read_gives_lost_and_the_pool_goes_on() {
        let readers = Readers::new("test-reader");
        let lost = readers.read("lost", || -> &'static str { panic!("a read that panics") });
        assert_eq!(lost.wait(), "lost");
        assert_eq!(readers.read("lost", || "read").wait(), "read");
    }

    #[test]
    fn reads_queued_before_the_drop_still_run() {
        let ran = Arc::new(AtomicUsize::new(0));
        let readers = Readers::new("test-reader");
        let futures: Vec<_> = (0..16)
            .map(|_| {
                let ran = Arc::clone(&ran);
                readers.read(false, move || {
                    std::thread::sleep(Duration::from_millis(1));
                    ran.fetch_add(1, Ordering::SeqCst);
                    true
                })
            })
            .collect();
        drop(readers);
        assert!(futures.into_iter().all(StoreFuture::wait));
        assert_eq!(ran.load(Ordering::SeqCst), 16);
    }

    #[test]
    fn threads_are_reused_when_idle() {
        let readers = Readers::new("test-reader");
        let mut seen = std::collections::HashSet::new();
        for _ in 0..50 {
            seen.insert(readers.read(None, || Some(std::thread::current().id())).wait().unwrap());
        }
        // Not a thread per read: the threads that finished take the next reads.
        assert!(seen.len() <= MAX_THREADS, "{} threads for 50 reads", seen.len());
        assert!(readers.threads() <= MAX_THREADS);
    }
}
