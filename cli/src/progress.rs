//! A progress bar on standard error (indicatif): count, rate and time left, drawn only when
//! standard error is a terminal, so nothing of it reaches a pipe or a file.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// A progress bar over a number of units (bytes, sessions).
pub(crate) struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar labelled `label`, drawn on standard error when `enabled` (it is a terminal),
    /// counting bytes when `bytes`, else items.
    pub(crate) fn new(enabled: bool, label: &'static str, bytes: bool) -> Self {
        let target =
            if enabled { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(None, target);
        let template = if bytes {
            "{prefix} [{bar:30}] {percent:>3}% {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
        } else {
            "{prefix} [{bar:30}] {percent:>3}% {human_pos}/{human_len} {rate} eta {eta}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            let style =
                style.with_key("rate", |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    // A whole number per second: the default's four decimals only flicker.
                    let _ = write!(w, "{:.0}/s", state.per_sec());
                });
            bar.set_style(style.progress_chars("#>."));
        }
        bar.set_prefix(label);
        Progress { bar }
    }

    /// Records that `done` of `total` units are through.
    pub(crate) fn update(&mut self, done: u64, total: u64) {
        self.bar.set_length(total);
        self.bar.set_position(done.min(total));
    }

    /// Clears the bar.
    pub(crate) fn finish(&mut self) {
        self.bar.finish_and_clear();
    }

    /// Whether the bar is drawn at all.
    #[cfg(test)]
    fn is_drawn(&self) -> bool {
        !self.bar.is_hidden()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_counts_and_is_hidden_unless_enabled() {
        let mut quiet = Progress::new(false, "verify", true);
        quiet.update(1 << 20, 4 << 20);
        assert!(!quiet.is_drawn());
        assert_eq!(quiet.bar.position(), 1 << 20);
        assert_eq!(quiet.bar.length(), Some(4 << 20));
        quiet.update(9 << 20, 4 << 20);
        assert_eq!(quiet.bar.position(), 4 << 20, "never past the end");
        quiet.finish();
        assert!(quiet.bar.is_finished());
    }
}
