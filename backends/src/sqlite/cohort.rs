//! How long the next group's leader waits for the cohort returning from the previous commit.
//!
//! With one transaction committing at a time and a leader that takes only what is queued, N
//! appenders split into two alternating halves: while one half's group commits, the other
//! queues, and the first half, answered, comes back just after the next leader took the queue.
//! Groups of N/2, two commits per round. The fix is to let the next leader wait briefly for the
//! appenders of the group just committed (the cohort) to queue again, so that one group holds
//! them all.
//!
//! The wait is bounded and learned:
//! - it happens only while appenders of the last group have not queued again, so a lone
//!   appender (its group was itself, and it is the one queuing) never waits;
//! - it is at most a fraction of the measured commit time ([`CAP_FRACTION`], and never more
//!   than [`CAP`]): a wait longer than a commit would cost more than it saves;
//! - the budget adapts: a cohort that came back in time sets it to a margin over how long it
//!   took; a wait that ran out without the cohort halves it, down to no wait at all (appenders
//!   that do other work between appends, or that stopped), with a probe now and then to learn
//!   whether cohorts came back.

use std::time::Duration;

/// The most the budget is, whatever the commits take.
pub(super) const CAP: Duration = Duration::from_micros(250);

/// The budget's bound as a fraction of the mean commit time.
const CAP_FRACTION: f64 = 0.25;

/// How many groups pass between probes once the budget fell to nothing.
const PROBE_EVERY: u64 = 32;

/// Weight of the newest commit time in the running mean.
const EWMA: f64 = 0.2;

/// The learned state, kept under the queue's lock.
#[derive(Debug, Clone, Default)]
pub(super) struct Cohort {
    /// Appends in the last group committed.
    last_group: usize,
    /// Appends queued since it was committed.
    returned: usize,
    /// The mean commit time, in µs.
    commit_us: f64,
    /// The learned wait budget, in µs (at most the cap).
    budget_us: f64,
    /// Groups since the budget fell to nothing.
    idle_groups: u64,
    /// Whether a commit was measured yet (the budget starts at the cap after the first).
    measured: bool,
}

/// What a leader's wait for the cohort came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Waited {
    /// Every appender of the last group queued again, after this long.
    Complete(Duration),
    /// The budget ran out first.
    RanOut,
}

impl Cohort {
    /// An append queued.
    pub(super) fn arrived(&mut self) {
        self.returned = self.returned.saturating_add(1);
    }

    /// Appenders of the last group that have not queued again.
    pub(super) fn missing(&self) -> usize {
        self.last_group.saturating_sub(self.returned)
    }

    fn cap_us(&self) -> f64 {
        (self.commit_us * CAP_FRACTION).min(CAP.as_secs_f64() * 1e6)
    }

    /// How long the next leader may wait for the missing appenders; zero for none.
    pub(super) fn budget(&mut self) -> Duration {
        if self.missing() == 0 {
            return Duration::ZERO;
        }
        let mut us = self.budget_us.min(self.cap_us());
        if us <= 0.0 {
            self.idle_groups += 1;
            if self.idle_groups.is_multiple_of(PROBE_EVERY) {
                us = self.cap_us() / 2.0;
            }
        }
        Duration::from_secs_f64(us.max(0.0) / 1e6)
    }

    /// Learns from a wait.
    pub(super) fn waited(&mut self, waited: Waited) {
        match waited {
            Waited::Complete(took) => {
                let needed = took.as_secs_f64() * 1e6 * 2.0 + 20.0;
                self.budget_us = needed.max(self.budget_us * 0.9).min(self.cap_us());
                self.idle_groups = 0;
            }
            Waited::RanOut => {
                self.budget_us /= 2.0;
                if self.budget_us < 10.0 {
                    self.budget_us = 0.0;
                }
            }
        }
    }

    /// A group of `size` appends committed in `took`; the appends queued from now on are its
    /// cohort coming back (or others).
    pub(super) fn committed(&mut self, size: usize, took: Duration) {
        let us = took.as_secs_f64() * 1e6;
        self.commit_us =
            if self.commit_us == 0.0 { us } else { self.commit_us * (1.0 - EWMA) + us * EWMA };
        if !self.measured {
            // Nothing learned yet: start from the cap.
            self.measured = true;
            self.budget_us = self.cap_us();
        }
        self.last_group = size;
        self.returned = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn a_lone_appender_never_waits() {
        let mut c = Cohort::default();
        for _ in 0..100 {
            c.committed(1, us(1000));
            c.arrived();
            assert_eq!(c.budget(), Duration::ZERO);
        }
    }

    #[test]
    fn a_cohort_is_waited_for_at_most_a_fraction_of_a_commit() {
        let mut c = Cohort::default();
        c.committed(8, us(400));
        c.arrived();
        assert_eq!(c.missing(), 7);
        assert_eq!(c.budget(), us(100), "a quarter of the commit time");
        c.committed(8, us(4000));
        c.arrived();
        assert!(c.budget() <= CAP, "never past the cap");
    }

    #[test]
    fn waits_that_run_out_fall_to_none_and_a_probe_follows_now_and_then() {
        let mut c = Cohort::default();
        c.committed(2, us(1000));
        for _ in 0..10 {
            c.waited(Waited::RanOut);
        }
        let mut waits = 0;
        for _ in 0..(2 * PROBE_EVERY) {
            c.committed(2, us(1000));
            c.arrived();
            if c.budget() > Duration::ZERO {
                waits += 1;
            }
        }
        assert_eq!(waits, 2, "one probe every {PROBE_EVERY} groups");
        c.waited(Waited::Complete(us(30)));
        c.committed(2, us(1000));
        c.arrived();
        assert_eq!(c.budget(), us(80), "a margin over what the cohort took");
    }
}
