//! The sync API's wait: polls one of the writer's futures on the calling thread, parking it
//! between polls until the future's waker unparks it. It is the store's own
//! ([`stepjournal_backends::block_on`]), which a deferred
//! [`StoreFuture`](stepjournal_backends::StoreFuture) is waited on with: one wait for both.

pub use stepjournal_backends::block_on;

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
