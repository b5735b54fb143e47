//! [`Clock`]: where the writer takes the time it stamps each append with.
//!
//! The time is for operators (`export`, `show`); recovery never reads it. The system clock is
//! the default; a fixed or stepping clock makes a run's bytes the same every time it is made
//! (simulators, golden tests).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use stepjournal_codec::UnixMillis;

/// A source of the wall-clock time an append is stamped with. Every event of one batch gets
/// the time read once for it.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The time now, in milliseconds since the Unix epoch.
    fn now(&self) -> UnixMillis;
}

/// The system's wall clock: [`JournalOptions`](super::JournalOptions)'s default. A time before
/// the Unix epoch reads as 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixMillis {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        UnixMillis(ms)
    }
}

/// A clock that always reads the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedClock(UnixMillis);

impl FixedClock {
    /// A clock that reads `at`.
    pub fn new(at: UnixMillis) -> Self {
        FixedClock(at)
    }
}

impl Clock for FixedClock {
    fn now(&self) -> UnixMillis {
        self.0
    }
}

/// A clock that reads `start`, then moves on by `step` each time it is read (saturating at the
/// largest time): every append gets its own time, and the same appends get the same times on
/// every run. For simulators and tests; one clock can be shared by many runs.
#[derive(Debug)]
pub struct SteppingClock {
    next: AtomicU64,
    /// Whole milliseconds.
    step: u64,
}

impl SteppingClock {
    /// A clock that first reads `start` and moves on by `step` (whole milliseconds) per read.
    pub fn new(start: UnixMillis, step: Duration) -> Self {
        let step = u64::try_from(step.as_millis()).unwrap_or(u64::MAX);
        SteppingClock { next: AtomicU64::new(start.get()), step }
    }
}

impl Clock for SteppingClock {
    fn now(&self) -> UnixMillis {
        let step = |t: u64| Some(t.saturating_add(self.step));
        // The closure always returns `Some`: the update cannot fail.
        let read = self.next.fetch_update(Ordering::Relaxed, Ordering::Relaxed, step);
        UnixMillis(read.unwrap_or_else(|t| t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stepping_clock_moves_on_by_its_step_per_read_and_stops_at_the_largest_time() {
        let clock = SteppingClock::new(UnixMillis(1_000), Duration::from_millis(5));
        let reads: Vec<u64> = (0..3).map(|_| clock.now().get()).collect();
        assert_eq!(reads, [1_000, 1_005, 1_010]);
        let late = SteppingClock::new(UnixMillis(u64::MAX - 1), Duration::from_millis(5));
        let reads: Vec<u64> = (0..3).map(|_| late.now().get()).collect();
        assert_eq!(reads, [u64::MAX - 1, u64::MAX, u64::MAX]);
    }

    #[test]
    fn a_fixed_clock_always_reads_its_time() {
        let clock = FixedClock::new(UnixMillis(42));
        assert_eq!((clock.now(), clock.now()), (UnixMillis(42), UnixMillis(42)));
    }

    #[test]
    fn the_system_clock_reads_a_time_after_2020() {
        // 2020-01-01T00:00:00Z: far enough before any machine this runs on.
        assert!(SystemClock.now().get() > 1_577_836_800_000, "{:?}", SystemClock.now());
    }
}
