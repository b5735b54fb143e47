//! The store's committer thread: it commits the groups no sync caller leads (those of async
//! callers, and what queued while a sync caller's group committed), so that an async caller
//! never runs a transaction on its own task.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::shared::Shared;

/// The running committer; stopped and joined when dropped, after committing what is queued.
#[derive(Debug)]
pub(super) struct Committer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Committer {
    /// Starts the committer of `shared`'s queue.
    pub(super) fn start(shared: Arc<Shared>) -> std::io::Result<Self> {
        let worker = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("stepjournal-sqlite-commit".to_owned())
            .spawn(move || {
                while let Some(group) = worker.queue.next_group() {
                    // A panic inside a commit resolves that group's futures as unanswered (its
                    // requests are dropped with it); the committer goes on with the next, so
                    // that no later append waits for a thread that is gone.
                    let commit = std::panic::AssertUnwindSafe(|| worker.commit(group));
                    let _ = std::panic::catch_unwind(commit);
                }
            })?;
        Ok(Committer { shared, thread: Some(thread) })
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.shared.queue.close();
        if let Some(thread) = self.thread.take() {
            // A panic of the committer was answered already: every future it held resolved
            // as unanswered when its group was dropped.
            let _ = thread.join();
        }
    }
}
