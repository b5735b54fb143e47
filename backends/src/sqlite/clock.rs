//! This machine's clock, by which the SQLite store takes, renews and judges leases.
//!
//! Every process sharing the database file runs on this machine, so the kernel's real-time
//! clock is the one clock they share. It is read from the kernel (its vDSO, or a system call)
//! through rustix, not through the C library's `clock_gettime`: a process whose C library clock
//! is shifted (libfaketime's `LD_PRELOAD`, as a test or an operator may run the command) still
//! takes and judges leases by the clock every other process sets them by. The journal's own
//! `Clock`, which stamps events, is never read here.

/// Now, in unix milliseconds, by the kernel's real-time clock (0 before the epoch).
pub(super) fn now_ms() -> i64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    let ms = now.tv_sec.saturating_mul(1000).saturating_add(now.tv_nsec / 1_000_000);
    ms.max(0)
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;

    #[test]
    fn the_kernel_s_clock_agrees_with_the_library_s_when_nothing_shifts_it() {
        let library = |()| {
            let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
            i64::try_from(since.as_millis()).unwrap()
        };
        let before = library(());
        let kernel = now_ms();
        let after = library(());
        // Under faketime (a shifted C library clock) the two differ by the shift: this test
        // says what a plain run sees.
        assert!(before - 5 <= kernel && kernel <= after + 5, "{before} <= {kernel} <= {after}");
    }
}
