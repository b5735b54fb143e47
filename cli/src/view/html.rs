//! The page's HTML pieces: text escaped as the terminal output escapes it, and the marks of a
//! row placed on the sequence axis.

use stepjournal_codec::Record;
use stepjournal_codec::json::record_to_export_line;

use super::marks::Mark;
use crate::shown::json_for_terminal;

/// Text for HTML (element content and quoted attribute values alike). The characters the
/// terminal output escapes (controls, line separators, bidirectional controls) are written as
/// the same visible `\u{HEX}`, so `c-\u{202e}evil` never reads reversed on the page; newlines
/// stay.
pub(super) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c != '\n' && crate::shown::is_escaped(c) => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

pub(super) fn write_marks(
    html: &mut String,
    marks: &[Mark],
    n: u64,
    records: &[Record],
    extra: &[(&'static str, String)],
) {
    let pct = |x: u64| x as f64 * 100.0 / n as f64;
    for m in marks {
        // The same JSON value, with the characters the terminal escapes written as JSON escapes
        // (`esc` would otherwise make them visible text inside its strings, no longer JSON).
        let json = crate::store::at_seq(records, m.seq)
            .map(|r| json_for_terminal(&record_to_export_line(r)))
            .unwrap_or_default();
        let is_bar = m.end > m.start
            || ["run", "step", "attempt", "wait"].iter().any(|c| m.class.starts_with(c));
        let style = if is_bar {
            format!("left:{:.3}%;width:{:.3}%", pct(m.start), pct(m.end + 1 - m.start))
        } else {
            format!("left:{:.3}%", pct(m.start) + 50.0 / n as f64)
        };
        html.push_str(&format!(
            "<div class=\"mark {} {}\" style=\"{style}\" title=\"{}\" data-seq=\"{}\" data-json=\"{}\"",
            if is_bar { "bar" } else { "tick" },
            esc(&m.class),
            esc(&format!("seq {}: {}", m.seq, m.title)),
            m.seq,
            esc(&json)
        ));
        for (k, v) in extra.iter().chain(&m.attrs) {
            html.push_str(&format!(" {k}=\"{}\"", esc(v)));
        }
        html.push_str(&format!(">{}</div>", esc(&m.text)));
    }
}
