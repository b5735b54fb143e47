//! Reading a directory a live writer changes: how often a read-only open or a verify starts
//! again from a new listing, and the pause between attempts.
//!
//! A read that takes no lock starts again whenever a segment it listed is gone before it was
//! read (rotation and compaction remove segments). A writer with tiny segments that compacts
//! all the time can remove one during most scans; a pause that grows with each attempt lets a
//! scan fall between two of its compactions, and the attempts stay bounded (about 1.2 s of
//! pauses in all) so a read never hangs.

use std::time::Duration;

/// How many times a read without the lock reads the directory again.
pub(super) const ATTEMPTS: u32 = 64;

/// The pause before attempt `attempt` (0-based): none before the first, then 1 ms more per
/// attempt, at most 20 ms.
pub(super) fn pause(attempt: u32) {
    if attempt > 0 {
        std::thread::sleep(Duration::from_millis(u64::from(attempt.min(20))));
    }
}
