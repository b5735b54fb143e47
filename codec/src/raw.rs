//! [`RawJson`]: arbitrary JSON (tool arguments, outputs) kept as the text it arrived as.
//!
//! serde's `Value` cannot pass through a format without self-description (postcard), and keeping
//! the text makes an export byte-identical after any number of round trips. The text is kept
//! compact: whitespace between tokens is dropped on the way in (it is never significant), so that an
//! event always prints on one line. Everything else (key order, number spelling, escapes) is kept.
//!
//! JSON taken in (the writer's [`RawJson::parse`], an export line, a scenario's log) nests at
//! most [`RawJson::MAX_DEPTH`] arrays and objects: deeper text is refused, saying its depth and
//! the limit.
//! A record already stored is read whatever its depth; [`RawJson::to_value`] then says why it
//! cannot be parsed rather than giving another value.

use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON value kept as compact JSON text. Always holds valid JSON.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RawJson(Box<str>);

impl RawJson {
    /// The deepest nesting of arrays and objects JSON taken in may have (`[]` is 1 deep, `[{}]`
    /// 2, a number 0). Well under serde_json's own parser's limit of 127, so a value a few
    /// levels down in an event's line still parses as one `serde_json::Value`.
    pub const MAX_DEPTH: usize = 100;

    /// How deep arrays and objects nest in valid JSON `text` (0 for a scalar), counted without
    /// recursion whatever the depth.
    pub fn nesting_depth(text: &str) -> usize {
        depth(text)
    }

    /// Parses `text` as one JSON value and keeps it, compacted. JSON nested deeper than
    /// [`RawJson::MAX_DEPTH`] is an error naming its depth and the limit.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        let raw: &RawValue = serde_json::from_str(text)?;
        Self::from_raw(raw)
    }

    /// Keeps a parsed raw value, compacted; nested deeper than [`RawJson::MAX_DEPTH`] it is
    /// refused.
    pub fn from_raw(raw: &RawValue) -> Result<Self, serde_json::Error> {
        check_depth(raw.get())?;
        Ok(RawJson(compact(raw.get()).into_boxed_str()))
    }

    /// Serializes `value` to compact JSON; nested deeper than [`RawJson::MAX_DEPTH`] it is
    /// refused.
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        let text = serde_json::to_string(value)?;
        check_depth(&text)?;
        Ok(RawJson(text.into_boxed_str()))
    }

    /// The empty object `{}`: the default of a call's `args`.
    pub fn empty_object() -> Self {
        RawJson("{}".into())
    }

    /// `null`.
    pub fn null() -> Self {
        RawJson("null".into())
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.0
    }

    /// Parses the text into a `serde_json::Value` (for schema checks and display). Every value
    /// taken in under [`RawJson::MAX_DEPTH`] parses; a stored one nested deeper than
    /// serde_json's limit of 127 is an error saying so, never another value.
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

impl Default for RawJson {
    fn default() -> Self {
        Self::empty_object()
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            let raw: &RawValue =
                serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
            raw.serialize(serializer)
        } else {
            serializer.serialize_str(&self.0)
        }
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            let raw = Box::<RawValue>::deserialize(deserializer)?;
            RawJson::from_raw(&raw).map_err(D::Error::custom)
        } else {
            // A stored record is read whatever its depth (only what is taken in is bounded).
            let text = String::deserialize(deserializer)?;
            // The binary form must hold one valid, compact JSON value.
            let raw: &RawValue = serde_json::from_str(&text)
                .map_err(|e| D::Error::custom(format_args!("not JSON: {e}")))?;
            if raw.get().len() != text.len() || !is_compact(&text) {
                return Err(D::Error::custom("JSON text is not compact"));
            }
            Ok(RawJson(text.into_boxed_str()))
        }
    }
}

/// Refuses JSON text nested deeper than [`RawJson::MAX_DEPTH`], saying how deep.
fn check_depth(text: &str) -> Result<(), serde_json::Error> {
    let depth = depth(text);
    if depth > RawJson::MAX_DEPTH {
        return Err(serde_json::Error::custom(format_args!(
            "the JSON value nests {depth} arrays and objects deep; the limit is {}",
            RawJson::MAX_DEPTH
        )));
    }
    Ok(())
}

/// How deep arrays and objects nest in valid JSON text (0 for a scalar).
fn depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut in_string = false;
    let mut escaped = false;
    for b in text.bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    deepest
}

/// Walks valid JSON text a character at a time, telling the whitespace between its tokens from
/// everything else (string contents are never whitespace between tokens).
#[derive(Default)]
struct Tokens {
    in_string: bool,
    escaped: bool,
}

impl Tokens {
    /// Whether `c`, the next character, is kept by compacting (it is not whitespace between
    /// tokens).
    fn keeps(&mut self, c: char) -> bool {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if c == '\\' {
                self.escaped = true;
            } else if c == '"' {
                self.in_string = false;
            }
            true
        } else if c == '"' {
            self.in_string = true;
            true
        } else {
            !matches!(c, ' ' | '\t' | '\n' | '\r')
        }
    }
}

/// Whether `text`, valid JSON, holds no whitespace between its tokens: what [`compact`] would
/// leave as it is, found without copying it.
fn is_compact(text: &str) -> bool {
    let mut tokens = Tokens::default();
    text.chars().all(|c| tokens.keeps(c))
}

/// Drops the whitespace between the tokens of valid JSON text; string contents are untouched.
fn compact(text: &str) -> String {
    let mut tokens = Tokens::default();
    text.chars().filter(|&c| tokens.keeps(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_compact_agrees_with_compacting() {
        for text in [
            r#"{"a":1}"#,
            r#"{"a": 1}"#,
            r#"{"a":"x y"}"#,
            r#"{"a":"q\" z"}"#,
            r#"{"a":"q\\" ,"b":2}"#,
            "[1,\n2]",
            r#""\\""#,
            "null",
        ] {
            assert_eq!(is_compact(text), compact(text) == text, "{text}");
        }
    }

    #[test]
    fn whitespace_between_tokens_is_dropped_and_strings_are_kept() {
        let raw = RawJson::parse("{ \"a b\" : [1, 2.50,\n \"x \\\" y\" ] }").unwrap();
        assert_eq!(raw.get(), r#"{"a b":[1,2.50,"x \" y"]}"#);
    }

    fn nested(depth: usize) -> String {
        let mut text = String::new();
        for i in 0..depth {
            text.push_str(if i % 2 == 0 { "[" } else { r#"{"k":"# });
        }
        // A string holding brackets and an escaped quote: not nesting.
        text.push_str(r#""]}\"""#);
        for i in (0..depth).rev() {
            text.push(if i % 2 == 0 { ']' } else { '}' });
        }
        text
    }

    #[test]
    fn json_nested_deeper_than_the_limit_is_refused_saying_how_deep() {
        // Defect: a 100,000-deep value was taken in (serde_json skips a raw value without
        // counting its depth) and later read back as `null` (its parse into a `Value` hit
        // serde_json's recursion limit and the error was replaced by `null`).
        assert_eq!(depth(&nested(7)), 7);
        assert_eq!(depth(r#"["[[[{", {"a": "}}}"}]"#), 2);
        let deepest = RawJson::parse(&nested(RawJson::MAX_DEPTH)).unwrap();
        let value = deepest.to_value().unwrap();
        assert_eq!(RawJson::from_value(&value).unwrap(), deepest, "read back as it was");
        let mut value = serde_json::json!(1);
        for _ in 0..=RawJson::MAX_DEPTH {
            value = serde_json::json!([value]);
        }
        let err = RawJson::from_value(&value).unwrap_err().to_string();
        assert!(err.contains("nests 101 "), "{err}");
        for too_deep in [RawJson::MAX_DEPTH + 1, 100_000] {
            let err = RawJson::parse(&nested(too_deep)).unwrap_err().to_string();
            assert!(
                err.contains(&format!("nests {too_deep} ")) && err.contains("limit is 100"),
                "{err}"
            );
            let in_event = format!(r#"{{"args":{}}}"#, nested(too_deep));
            #[derive(Debug, serde::Deserialize)]
            struct Holder {
                #[expect(dead_code, reason = "only its parse is tested")]
                args: RawJson,
            }
            let err = serde_json::from_str::<Holder>(&in_event).unwrap_err().to_string();
            assert!(err.contains("the limit is 100"), "{err}");
        }
    }

    #[test]
    fn a_stored_value_too_deep_to_parse_says_so_rather_than_becoming_null() {
        // Defect: `to_value` replaced a value it could not parse by `null`.
        let text = nested(200);
        let bytes = postcard::to_stdvec(text.as_str()).unwrap();
        let stored: RawJson = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(stored.get(), text, "a stored record is read whatever its depth");
        let err = stored.to_value().unwrap_err().to_string();
        assert!(err.contains("recursion limit"), "{err}");
    }

    #[test]
    fn binary_form_refuses_text_that_is_not_json() {
        let bytes = postcard::to_stdvec("{not json").unwrap();
        assert!(postcard::from_bytes::<RawJson>(&bytes).is_err());
        let bytes = postcard::to_stdvec("{ }").unwrap();
        assert!(postcard::from_bytes::<RawJson>(&bytes).is_err(), "uncompacted text is refused");
        let bytes = postcard::to_stdvec("{}").unwrap();
        assert_eq!(postcard::from_bytes::<RawJson>(&bytes).unwrap().get(), "{}");
    }
}
