//! How the command shows what it did not write itself: [`Shown`], text with the characters that
//! act on a terminal escaped, and [`StoreName`], a store's URL with its password hidden.
//!
//! Identifiers stored in a journal (session, run, checkpoint, call, tool, group and dispatch
//! ids) are whatever a writer gave: every human-readable line prints them through [`Shown`], and
//! `main` prints every error message through it, so none can move the cursor, retitle the
//! window, clear the screen, forge a line or reorder the text around it. JSON output is exact.

use std::fmt::{self, Write as _};

use stepjournal_backends::StoreUrl;

/// Whether `c` is escaped when shown: the characters that act on a terminal or on the text
/// around them (`stepjournal_codec::acts_on_text`, the rule session ids are checked by): the
/// C0 controls (newline and tab among them), DEL, the C1 controls, the line and paragraph
/// separators, and the bidirectional controls.
pub use stepjournal_codec::acts_on_text as is_escaped;

/// Writes `text` to `out` with every [escaped](is_escaped) character as `\u{HEX}` (ESC shows as
/// `\u{1b}`, a newline as `\u{a}`). Backslashes are kept as they are, so escaping shown text
/// again changes nothing.
fn write_escaped(out: &mut impl fmt::Write, text: &str) -> fmt::Result {
    let mut rest = text;
    while let Some(i) = rest.find(is_escaped) {
        let (plain, tail) = rest.split_at(i);
        out.write_str(plain)?;
        let mut chars = tail.chars();
        if let Some(c) = chars.next() {
            write!(out, "\\u{{{:x}}}", u32::from(c))?;
        }
        rest = chars.as_str();
    }
    out.write_str(rest)
}

/// Writes escaped into a formatter (or any `fmt::Write`).
struct Escaper<'a, W: fmt::Write>(&'a mut W);

impl<W: fmt::Write> fmt::Write for Escaper<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        write_escaped(self.0, s)
    }
}

/// Shows a value's text with every [escaped](is_escaped) character written `\u{HEX}`. Width,
/// fill and alignment apply to the escaped text (`{:<8}` pads what is shown).
#[derive(Debug, Clone, Copy)]
pub struct Shown<T>(pub T);

impl<T: fmt::Display> fmt::Display for Shown<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.width().is_none() && f.precision().is_none() {
            return write!(Escaper(f), "{}", self.0);
        }
        let mut text = String::new();
        write!(Escaper(&mut text), "{}", self.0)?;
        f.pad(&text)
    }
}

/// `text` with every [escaped](is_escaped) character written `\u{HEX}`.
pub fn escape(text: &str) -> String {
    Shown(text).to_string()
}

/// Compact JSON text (no whitespace between tokens) with every [escaped](is_escaped) character
/// written as a JSON escape (`\u202e`): the same JSON value, safe on a terminal. (In compact
/// JSON such characters can only be inside strings, where `\uXXXX` stands for them exactly.)
pub fn json_for_terminal(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_escaped(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// A store's URL as every message and output line names it: with any password hidden
/// (`postgres://user:***@host/db`). The only way to make one is [`StoreName::of`], so no
/// message can carry the URL as it was typed.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreName(String);

impl StoreName {
    /// The name of the store `url` names.
    pub fn of(url: &str) -> Self {
        StoreName(StoreUrl::redacted(url))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StoreName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Shown(&self.0), f)
    }
}

impl fmt::Debug for StoreName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn controls_and_bidi_overrides_are_escaped_and_the_rest_kept() {
        assert_eq!(escape("a\u{1b}]0;owned\u{7}b"), "a\\u{1b}]0;owned\\u{7}b");
        assert_eq!(escape("x\ny\tz\u{7f}\u{9b}\u{202e}"), "x\\u{a}y\\u{9}z\\u{7f}\\u{9b}\\u{202e}");
        assert_eq!(escape("plain-id_1 é 日本 \\u{1b}"), "plain-id_1 é 日本 \\u{1b}");
        let once = escape("\u{2066}\u{0}");
        assert_eq!(escape(&once), once, "escaping is idempotent");
    }

    #[test]
    fn json_keeps_its_value_with_controls_written_as_json_escapes() {
        let value = serde_json::json!({"id": "a\u{202e}b\u{9b}c\u{7f}\u{1b}"});
        let shown = json_for_terminal(&value.to_string());
        assert!(!shown.chars().any(is_escaped), "{shown}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&shown).unwrap(), value);
    }

    #[test]
    fn width_pads_the_escaped_text() {
        assert_eq!(format!("[{:<9}]", Shown("a\u{1b}")), "[a\\u{1b}  ]");
        assert_eq!(format!("[{:>3}]", Shown("ab")), "[ ab]");
        let mut s = String::new();
        write!(s, "{}", StoreName::of("postgres://u:pw@h/\u{1b}[2J")).unwrap();
        assert_eq!(s, "postgres://u:***@h/\\u{1b}[2J");
    }
}
