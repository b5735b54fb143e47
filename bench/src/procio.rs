//! Bytes this process read, from `rchar` in `/proc/self/io`: every byte `read`, `pread` and
//! their kin returned to it, from the page cache or the disk alike (the file backend reads with
//! `pread`, never through a map). Counted around one piece of work while no other thread of the
//! process reads; reading `/proc/self/io` itself counts too, and is taken off.

use std::fs;

/// `rchar` now, if `/proc/self/io` tells.
fn rchar() -> Option<u64> {
    let text = fs::read_to_string("/proc/self/io").ok()?;
    let line = text.lines().find(|l| l.starts_with("rchar:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A counter of the bytes read by the process since it was started.
#[derive(Debug, Clone, Copy)]
pub struct ReadCounter {
    start: u64,
    /// What one look at `/proc/self/io` reads.
    probe: u64,
}

impl ReadCounter {
    /// Starts counting, or `None` where `/proc/self/io` cannot be read.
    pub fn start() -> Option<ReadCounter> {
        let a = rchar()?;
        let b = rchar()?;
        let start = rchar()?;
        Some(ReadCounter { start, probe: b.saturating_sub(a) })
    }

    /// The bytes read since [`start`](Self::start), the counter's own looks taken off.
    pub fn bytes(&self) -> Option<u64> {
        let now = rchar()?;
        Some(now.saturating_sub(self.start).saturating_sub(self.probe))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_of_a_file_is_counted_with_its_length() {
        let path = std::env::temp_dir().join(format!("sj-procio-{}", std::process::id()));
        let data = vec![7u8; 100_000];
        let written = fs::write(&path, &data);
        let counter = ReadCounter::start();
        let back = fs::read(&path).map(|b| b.len());
        let read = counter.and_then(|c| c.bytes());
        let _ = fs::remove_file(&path);
        assert!(written.is_ok());
        assert_eq!(back.ok(), Some(100_000));
        // Other test threads may read too, so at least the file's bytes; not much less.
        assert!(read.is_some_and(|n| n >= 100_000), "{read:?}");
    }
}
