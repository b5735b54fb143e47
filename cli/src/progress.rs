//! A progress bar on standard error, drawn only on a terminal and only for scans that take a
//! while.

use std::io::Write;
use std::time::{Duration, Instant};

/// How long a scan runs before a bar appears.
const AFTER: Duration = Duration::from_millis(500);
/// How often the bar is redrawn at most.
const EVERY: Duration = Duration::from_millis(100);
const WIDTH: u64 = 30;

/// A progress bar over `total` units (bytes, sessions).
pub(crate) struct Progress<'w> {
    out: Option<&'w mut dyn Write>,
    label: &'static str,
    bytes: bool,
    start: Instant,
    drawn: Option<Instant>,
}

impl<'w> Progress<'w> {
    /// A bar drawn on `err` when `enabled` (standard error is a terminal).
    pub(crate) fn new(
        enabled: bool,
        err: &'w mut dyn Write,
        label: &'static str,
        bytes: bool,
    ) -> Self {
        Progress { out: enabled.then_some(err), label, bytes, start: Instant::now(), drawn: None }
    }

    fn amount(&self, n: u64) -> String {
        if self.bytes { format!("{} MiB", n >> 20) } else { n.to_string() }
    }

    /// Records that `done` of `total` units are through.
    pub(crate) fn update(&mut self, done: u64, total: u64) {
        let now = Instant::now();
        if self.out.is_none()
            || now.duration_since(self.start) < AFTER
            || self.drawn.is_some_and(|t| now.duration_since(t) < EVERY)
        {
            return;
        }
        let done = done.min(total);
        let filled = (done * WIDTH).checked_div(total).unwrap_or(WIDTH);
        let percent = (done * 100).checked_div(total).unwrap_or(100);
        let bar: String = (0..WIDTH).map(|i| if i < filled { '#' } else { '.' }).collect();
        let line = format!(
            "\r{} [{bar}] {percent:>3}% {}/{}",
            self.label,
            self.amount(done),
            self.amount(total)
        );
        if let Some(out) = self.out.as_mut() {
            // A bar that cannot be drawn is not worth failing the scan for.
            let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
        }
        self.drawn = Some(now);
    }

    /// Clears the bar, if one was drawn.
    pub(crate) fn finish(&mut self) {
        if let (Some(out), Some(_)) = (self.out.as_mut(), self.drawn) {
            let _ = out.write_all(b"\r\x1b[2K").and_then(|()| out.flush());
        }
        self.drawn = None;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_bar_is_drawn_only_when_enabled_and_after_a_while_and_is_cleared() {
        let mut out = Vec::new();
        let mut bar = Progress::new(true, &mut out, "verify", true);
        bar.update(1 << 20, 4 << 20);
        assert!(bar.drawn.is_none(), "not before the scan has run for a while");
        bar.start -= AFTER;
        bar.update(1 << 20, 4 << 20);
        bar.finish();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("\rverify [#######......"), "{text:?}");
        assert!(text.contains(" 25% 1 MiB/4 MiB"), "{text:?}");
        assert!(text.ends_with("\r\x1b[2K"), "{text:?}");
        let mut quiet = Vec::new();
        let mut bar = Progress::new(false, &mut quiet, "verify", false);
        bar.start -= AFTER;
        bar.update(1, 2);
        bar.finish();
        assert!(quiet.is_empty());
    }
}
