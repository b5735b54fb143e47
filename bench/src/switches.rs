//! Context switches of every live thread of this process, from `/proc/self/task/*/status`
//! (`voluntary_ctxt_switches`, `nonvoluntary_ctxt_switches`): a thread that waits for another
//! (a handoff) gives up the CPU voluntarily once per wait, so switches per append count the
//! handoffs an append costs, whatever the machine's load. Threads that ended are not counted:
//! take it around work whose threads live throughout (a runtime on this thread, a store's
//! committer).

use std::fs;

/// Voluntary and involuntary switches summed over the process's live threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Switches {
    pub voluntary: u64,
    pub involuntary: u64,
}

impl Switches {
    /// Now, or `None` where `/proc/self/task` cannot be read.
    pub fn now() -> Option<Switches> {
        let mut sum = Switches::default();
        for task in fs::read_dir("/proc/self/task").ok()? {
            let Ok(task) = task else { continue };
            // A thread that ended between the listing and the read is skipped.
            let Ok(status) = fs::read_to_string(task.path().join("status")) else { continue };
            sum.voluntary += field(&status, "voluntary_ctxt_switches:").unwrap_or(0);
            sum.involuntary += field(&status, "nonvoluntary_ctxt_switches:").unwrap_or(0);
        }
        Some(sum)
    }

    /// The switches from `earlier` to `self`.
    pub fn since(self, earlier: Switches) -> Switches {
        Switches {
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }
}

fn field(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_waits_for_another_switches_voluntarily() {
        let Some(before) = Switches::now() else { return };
        let (tx, rx) = std::sync::mpsc::channel::<bool>();
        // The waiter lives until told it is done, so its switches are counted.
        let waiter = std::thread::spawn(move || while let Ok(false) = rx.recv() {});
        for _ in 0..50 {
            std::thread::sleep(std::time::Duration::from_millis(1));
            let _ = tx.send(false);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let after = Switches::now().map(|now| now.since(before)).unwrap_or_default();
        let _ = tx.send(true);
        let _ = waiter.join();
        assert!(after.voluntary >= 50, "each receive waited for a send: {after:?}");
    }

    #[test]
    fn fields_are_read_by_name() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(field(status, "voluntary_ctxt_switches:"), Some(12));
        assert_eq!(field(status, "nonvoluntary_ctxt_switches:"), Some(3));
        assert_eq!(field(status, "missing:"), None);
    }
}
