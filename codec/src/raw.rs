//! [`RawJson`]: arbitrary JSON (tool arguments, outputs) kept as the text it arrived as.
//!
//! serde's `Value` cannot pass through a format without self-description (postcard), and keeping
//! the text makes an export byte-identical after any number of round trips. The text is kept
//! compact: whitespace between tokens is dropped on the way in (it is never significant), so that an
//! event always prints on one line. Everything else (key order, number spelling, escapes) is kept.

use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON value kept as compact JSON text. Always holds valid JSON.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RawJson(Box<str>);

impl RawJson {
    /// Parses `text` as one JSON value and keeps it, compacted.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        let raw: &RawValue = serde_json::from_str(text)?;
        Ok(Self::from_raw(raw))
    }

    /// Keeps a parsed raw value, compacted.
    pub fn from_raw(raw: &RawValue) -> Self {
        RawJson(compact(raw.get()).into_boxed_str())
    }

    /// Serializes `value` to compact JSON.
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        Ok(RawJson(serde_json::to_string(value)?.into_boxed_str()))
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

    /// Parses the text into a `serde_json::Value` (for schema checks and display).
    pub fn to_value(&self) -> serde_json::Value {
        // The text was checked to be one JSON value when this was made.
        serde_json::from_str(&self.0).unwrap_or(serde_json::Value::Null)
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
            Ok(RawJson::from_raw(&raw))
        } else {
            let text = String::deserialize(deserializer)?;
            // The binary form must hold one valid, compact JSON value.
            let raw: &RawValue = serde_json::from_str(&text)
                .map_err(|e| D::Error::custom(format_args!("not JSON: {e}")))?;
            if raw.get().len() != text.len() || compact(&text).len() != text.len() {
                return Err(D::Error::custom("JSON text is not compact"));
            }
            Ok(RawJson(text.into_boxed_str()))
        }
    }
}

/// Drops the whitespace between the tokens of valid JSON text; string contents are untouched.
fn compact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_between_tokens_is_dropped_and_strings_are_kept() {
        let raw = RawJson::parse("{ \"a b\" : [1, 2.50,\n \"x \\\" y\" ] }").unwrap();
        assert_eq!(raw.get(), r#"{"a b":[1,2.50,"x \" y"]}"#);
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
