//! The two axes under the lanes: the log's sequence numbers, and beside them the time (UTC) each
//! labelled event was appended. Labels are spaced for the narrowest track the page draws
//! ([`MIN_TRACK_PX`]), each as wide as its text at the axis's font, so none is drawn over
//! another.

use stepjournal_codec::Record;

use super::html::esc;
use crate::time::rfc3339;

/// The narrowest the track is drawn (the page's CSS gives `.track` this minimum width).
pub(super) const MIN_TRACK_PX: u64 = 640;

/// The widest a character of the axis's 10 px font is drawn, with a margin, in px.
const CHAR_PX: u64 = 7;

/// The space left between two labels, in px.
const GAP_PX: u64 = 12;

/// Every how many seqs a label of `chars` characters can stand on an axis of `n` seqs.
fn every(n: u64, chars: usize) -> u64 {
    let width = chars as u64 * CHAR_PX + GAP_PX;
    let per_label = MIN_TRACK_PX / width.max(1);
    n.div_ceil(per_label.max(1)).max(1)
}

fn left(seq: u64, n: u64) -> f64 {
    (seq as f64 + 0.5) * 100.0 / n as f64
}

/// The seq axis.
pub(super) fn write_seq_axis(html: &mut String, n: u64) {
    html.push_str(
        "<div class=\"row axis axis-seq\"><div class=\"order\"></div><div class=\"label\">seq\
         </div><div class=\"track\">",
    );
    let step = every(n, n.saturating_sub(1).to_string().len());
    let mut seq = 0;
    while seq < n {
        html.push_str(&format!(
            "<span class=\"axis-tick\" data-seq=\"{seq}\" style=\"left:{:.3}%\">{seq}</span>",
            left(seq, n)
        ));
        seq += step;
    }
    html.push_str("</div><div class=\"facts\"></div></div>");
}

/// The time axis: the time of day (UTC) of every labelled event, its date too where it differs
/// from the previous label's.
pub(super) fn write_time_axis(html: &mut String, records: &[Record]) {
    let n = (records.len() as u64).max(1);
    html.push_str(
        "<div class=\"row axis axis-time\"><div class=\"order\"></div><div class=\"label\">\
         time (UTC)</div><div class=\"track\">",
    );
    // The widest label: a date and a time (`2025-01-15 09:00:00.000`).
    let step = every(n, 23);
    let mut date = String::new();
    let mut seq = 0;
    while let Some(r) = records.get(seq as usize) {
        let full = rfc3339(r.at);
        // `2025-01-15T09:00:00.000Z`; a time past the year 9999 is shown as `rfc3339` says it.
        let text = match (full.get(..10), full.get(11..23)) {
            (Some(day), Some(time)) if day != date => {
                date = day.to_owned();
                format!("{day} {time}")
            }
            (Some(_), Some(time)) => time.to_owned(),
            _ => full.clone(),
        };
        html.push_str(&format!(
            "<span class=\"axis-tick\" data-seq=\"{seq}\" title=\"seq {seq}: {}\" \
             style=\"left:{:.3}%\">{}</span>",
            esc(&full),
            left(seq, n),
            esc(&text)
        ));
        seq += step;
    }
    html.push_str("</div><div class=\"facts\"></div></div>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_spaced_by_their_width_on_the_narrowest_track() {
        // 23 characters at 7 px and a 12 px gap: 173 px a label, 3 labels on 640 px.
        assert_eq!(every(30, 23), 10);
        assert_eq!(every(3, 23), 1);
        assert_eq!(every(1, 2), 1);
        for n in [1u64, 2, 9, 10, 99, 1000, 100_000] {
            for chars in [1, 6, 23] {
                let labels = n.div_ceil(every(n, chars));
                let width = chars as u64 * CHAR_PX + GAP_PX;
                assert!(labels * width <= MIN_TRACK_PX.max(width), "n {n}, {chars} chars");
            }
        }
    }
}
