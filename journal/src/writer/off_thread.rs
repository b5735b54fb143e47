//! Reads an async caller must not wait for on its executor's thread, made on a thread of their
//! own.

use stepjournal_backends::{StoreError, StoreFuture};

/// `work` on a thread of its own (see [`StoreFuture::on_thread`]); `what` names it if the thread
/// is lost.
pub(crate) fn off_thread<T: Send + 'static>(
    what: &'static str,
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> StoreFuture<Result<T, StoreError>> {
    let lost = StoreError::Io {
        context: what.to_owned(),
        source: std::io::Error::other("the thread doing it stopped before it answered"),
    };
    StoreFuture::on_thread("stepjournal-read", Err(lost), work)
}
