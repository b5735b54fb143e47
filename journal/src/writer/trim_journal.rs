//! [`Journal::trim`]: a journal trims a session none of its runs (nor another process's, by its
//! live lease) holds open; what a trim keeps and how it lands are in [`super::trim`].

use stepjournal_backends::RunState;
use stepjournal_codec::SessionId;

use super::Journal;
use super::trim::{Trim, TrimError, trim_store};
use super::wait::block_on;

impl Journal {
    /// Drops `session`'s events before a kept snapshot, keeping at least the last `keep_turns`
    /// turns whole (see the module's text for what is kept, and `docs/recovery.md#trim` for
    /// what a trimmed session reads as). Returns what was dropped, or why nothing was.
    ///
    /// Refused while a run of the session is live ([`TrimError::Running`]); a session another
    /// actor wrote to between the read and the append is left as it is
    /// ([`TrimError::Changed`]). The store frees the dropped events' space as it frees a
    /// deletion's (rows deleted at once; the file store's segments compacted).
    pub fn trim(&self, session: &SessionId, keep_turns: usize) -> Result<Trim, TrimError> {
        block_on(self.trim_async(session, keep_turns))
    }

    /// [`trim`](Self::trim), awaited: the head's read, the log's read and the append made on
    /// the completion-based path (no read on the caller's thread but the file and memory
    /// stores' heads, which they answer from memory).
    ///
    /// **Dropped before it finished**: the `trimmed` event may have landed (the session is
    /// then trimmed, whole) or not (nothing changed).
    pub async fn trim_async(
        &self,
        session: &SessionId,
        keep_turns: usize,
    ) -> Result<Trim, TrimError> {
        let read = |source| TrimError::Read { session: session.clone(), source };
        if let Some(run) = self.own.open_run(session) {
            return Err(TrimError::Running { session: session.clone(), run: run.id().clone() });
        }
        let head = self.store.head_async(session).await.map_err(read)?;
        // A lease outlives the run it covered until it lapses or is released: only a live
        // lease on the open run counts.
        if let Some(head) = &head
            && let (RunState::Open { run }, Some(lease)) = (&head.run, head.live_lease())
            && &lease.run == run
        {
            return Err(TrimError::Running { session: session.clone(), run: run.clone() });
        }
        let options = &self.options;
        trim_store(&*self.store, session, keep_turns, &*options.clock, options.durability).await
    }
}
