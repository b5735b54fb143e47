//! When the next group waits for the cohort coming back from the last one.
//!
//! With one sync in flight, a leader that takes only what is queued when it starts splits N
//! appenders into two halves that alternate: while one half's sync runs, the other queues, and
//! the first comes back just after the second was taken. Groups hold N/2 and each append costs
//! 2/N syncs. So the committer, before taking the next group, waits briefly for the appenders of
//! the group it just answered (the cohort) to queue again, and the halves merge.
//!
//! The wait is bounded and learnt, never a fixed sleep:
//! - none after a group of one appender (a lone appender's latency is never raised), none once
//!   as many requests arrived since the group was answered as it held;
//! - at most [`MAX_WAIT`], and at most half of what the last groups' write and sync took (a
//!   wait that costs as much as a sync gains nothing; groups without a sync cost microseconds, so
//!   they do not wait at all);
//! - it ends as soon as no request arrived for a few times the gap measured between arrivals of
//!   returning appenders: appenders that went off to do something else are not waited for, and
//!   the group that is then taken without them is the next, smaller cohort.

use std::time::{Duration, Instant};

/// The longest the next group waits for its cohort.
pub(crate) const MAX_WAIT: Duration = Duration::from_micros(100);
/// A wait shorter than this is not worth a timed sleep (which overshoots by the timer slack,
/// about 50 µs on Linux).
const MIN_WAIT: Duration = Duration::from_micros(10);
/// The shortest time without an arrival that ends a wait.
const MIN_GAP: Duration = Duration::from_micros(20);
/// How many measured gaps without an arrival end a wait.
const GAPS: u64 = 4;

/// A moving average: each sample weighs 1/8.
fn average(old: u64, sample: Duration) -> u64 {
    let sample = u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX);
    if old == 0 { sample } else { old - old / 8 + sample / 8 }
}

/// The cohort of the last group answered, and what the committer learnt of the groups before.
#[derive(Debug, Default)]
pub(crate) struct Cohort {
    /// Requests in the last group answered: the appenders that may come back.
    size: usize,
    /// Requests queued since that group was answered.
    // Invariant: counts only arrivals after `answered`; reset when the next group is answered.
    arrived: usize,
    /// Whether a group was answered yet.
    answered: bool,
    /// The latest arrival since then.
    last: Option<Instant>,
    /// When the committer began waiting for the cohort.
    began: Option<Instant>,
    /// Whether the committer is waiting for the cohort now: the arrival that completes it wakes
    /// the committer.
    pub waiting: bool,
    /// Moving average of one group's write and sync, in nanoseconds.
    io_nanos: u64,
    /// Moving average of the time between two arrivals after a group was answered.
    gap_nanos: u64,
}

impl Cohort {
    /// A group of `size` requests was written (its write and sync took `io`) and is being
    /// answered now.
    pub(crate) fn answered(&mut self, size: usize, io: Duration) {
        // The leader answers; a committer waiting for the cohort is that leader, not answering.
        debug_assert!(!self.waiting, "a group is answered while the committer waits for it");
        self.io_nanos = average(self.io_nanos, io);
        self.size = size;
        self.arrived = 0;
        self.answered = true;
        self.last = None;
        self.began = None;
    }

    /// The store went idle: no cohort is awaited until the next group is answered (the moving
    /// averages are kept).
    pub(crate) fn forget(&mut self) {
        self.size = 0;
        self.arrived = 0;
        self.answered = false;
        self.last = None;
        self.began = None;
    }

    /// Whether arrivals are counted and timed now: a cohort of more than one may come back.
    pub(crate) fn tracking(&self) -> bool {
        self.answered && self.size > 1 && self.arrived < self.size
    }

    /// A request was queued at `now`. Returns whether it completes the cohort the committer
    /// waits for (then it must be woken). Only called while [`tracking`](Self::tracking).
    pub(crate) fn arrival(&mut self, now: Instant) -> bool {
        debug_assert!(self.tracking(), "an arrival counted with no cohort that may come back");
        if !self.answered {
            return false;
        }
        if let Some(last) = self.last {
            self.gap_nanos = average(self.gap_nanos, now.saturating_duration_since(last));
        }
        self.last = Some(now);
        self.arrived += 1;
        self.waiting && self.arrived >= self.size
    }

    /// Whether appenders of the last group may still come back: a leader that finds nothing
    /// queued should wait for them rather than stop.
    pub(crate) fn expected(&self) -> bool {
        self.size > 1 && self.arrived < self.size && self.cap() >= MIN_WAIT
    }

    /// The longest a wait may last.
    fn cap(&self) -> Duration {
        MAX_WAIT.min(Duration::from_nanos(self.io_nanos / 2))
    }

    /// How long the committer should sleep before looking again, at `now`; `None`: take the
    /// next group now.
    pub(crate) fn wait(&mut self, now: Instant) -> Option<Duration> {
        if !self.expected() {
            return None;
        }
        let began = *self.began.get_or_insert(now);
        let cap = self.cap();
        let gap = Duration::from_nanos(self.gap_nanos.saturating_mul(GAPS)).max(MIN_GAP).min(cap);
        let since = self.last.map_or(began, |last| last.max(began));
        let until = (began + cap).min(since + gap);
        let left = until.saturating_duration_since(now);
        (left > Duration::ZERO).then_some(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    /// A cohort of `size` just answered (at `t0`, which the cohort does not need), after groups
    /// whose I/O took `io` each.
    fn answered(size: usize, io: Duration, _t0: Instant) -> Cohort {
        let mut c = Cohort::default();
        c.answered(size, io);
        c
    }

    #[test]
    fn a_lone_appender_is_never_waited_for() {
        let t0 = Instant::now();
        let mut c = answered(1, 1000 * US, t0);
        assert_eq!(c.wait(t0), None);
        assert!(!c.expected());
    }

    #[test]
    fn no_wait_once_the_whole_cohort_is_back_and_the_last_arrival_wakes_the_waiter() {
        let t0 = Instant::now();
        let mut c = answered(3, 1000 * US, t0);
        assert!(c.wait(t0).is_some());
        c.waiting = true;
        assert!(!c.arrival(t0 + US));
        assert!(!c.arrival(t0 + 2 * US));
        assert!(c.arrival(t0 + 3 * US), "the third of three completes the cohort");
        assert_eq!(c.wait(t0 + 3 * US), None);
    }

    #[test]
    fn a_wait_lasts_at_most_the_bound_and_half_the_io_of_a_group() {
        let t0 = Instant::now();
        let mut slow = answered(8, 10_000 * US, t0);
        let first = slow.wait(t0).unwrap();
        assert!(first <= MAX_WAIT, "{first:?}");
        // Arrivals keep coming every 5 µs: the wait goes on, but never past the bound.
        let mut t = t0;
        for _ in 0..7 {
            t += 5 * US;
            slow.arrival(t);
        }
        assert!(slow.wait(t0 + MAX_WAIT).is_none());
        let mut fast = answered(8, 60 * US, t0);
        let left = fast.wait(t0).unwrap();
        assert!(left <= 30 * US, "half of a 60 µs sync: {left:?}");
        // A group without a sync costs microseconds: not worth a wait.
        let mut buffered = answered(8, 3 * US, t0);
        assert_eq!(buffered.wait(t0), None);
        assert!(!buffered.expected());
    }

    #[test]
    fn a_bound_below_the_gap_floor_still_bounds_the_wait() {
        // The defect: the gap limit was clamped between the floor and the bound, which panics
        // when half a fast group's I/O (the bound) is below the floor; the committer thread died
        // on the first such group.
        let t0 = Instant::now();
        let mut c = answered(4, 30 * US, t0);
        let left = c.wait(t0).unwrap();
        assert!(left <= 15 * US, "{left:?}");
        assert_eq!(c.wait(t0 + 15 * US), None);
    }

    #[test]
    fn a_wait_ends_when_no_one_arrives_for_a_few_gaps() {
        let t0 = Instant::now();
        let mut c = answered(10, 10_000 * US, t0);
        // Returning appenders came 2 µs apart; then nobody comes.
        let mut t = t0;
        for _ in 0..5 {
            t += 2 * US;
            c.arrival(t);
        }
        let left = c.wait(t).unwrap();
        assert!(left <= MIN_GAP, "{left:?}");
        assert_eq!(c.wait(t + MIN_GAP), None, "no arrival within the gap: take the group");
    }

    #[test]
    fn an_idle_store_awaits_no_cohort() {
        // The defect: a cohort left waiting for when the store went idle made the first async
        // append of the next burst wait for appenders long gone.
        let t0 = Instant::now();
        let mut c = answered(8, 1000 * US, t0);
        c.arrival(t0 + US);
        assert!(c.expected());
        c.forget();
        assert!(!c.expected() && !c.tracking());
        assert_eq!(c.wait(t0 + 1000 * US), None);
    }

    #[test]
    fn a_new_group_starts_a_new_cohort() {
        let t0 = Instant::now();
        let mut c = answered(4, 1000 * US, t0);
        for k in 1..=4 {
            c.arrival(t0 + k * US);
        }
        assert!(!c.expected());
        c.answered(4, 1000 * US);
        assert!(c.expected(), "the next cohort is awaited afresh");
    }
}
