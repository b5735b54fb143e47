//! Who and why: the operator a command line acts as, and the reason they gave
//! (`run_started.by`, `run_ended.by`), and the provider's continuation handle of a cut model
//! stream (`model_aborted.continuation`). Members of format version 4.

use serde::{Deserialize, Serialize};

use crate::IdError;

/// Who wrote a run's events from outside the runtime (an operator at the command line), and
/// why: `run_started.by` (a run an answer or an approval began) and `run_ended.by` (a stop,
/// which begins no run). Either part may be absent, not both.
///
/// **The rule** ([`Operator::new`] checks it, and every append checks it again): a name of 1 to
/// [`Operator::MAX_NAME`] bytes, a reason of 1 to [`Operator::MAX_REASON`] bytes, neither
/// holding a character that [acts on text](crate::acts_on_text) (no control character, no line
/// separator, no bidirectional control), at least one of them given. Readers accept whatever is
/// stored and show it escaped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Operator {
    /// Who (`--as`; `$STEPJOURNAL_OPERATOR`, `$USER` or `$LOGNAME` at the command line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// Why (`--reason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl Operator {
    /// The longest name, in bytes.
    pub const MAX_NAME: usize = 200;
    /// The longest reason, in bytes.
    pub const MAX_REASON: usize = 2000;

    /// The operator `name` acting for `reason`, if they keep the rule (see [`Operator`]); `None`
    /// when both are absent (there is nothing to record).
    pub fn new(
        name: Option<impl Into<String>>,
        reason: Option<impl Into<String>>,
    ) -> Result<Option<Self>, IdError> {
        let operator = Operator { name: name.map(Into::into), reason: reason.map(Into::into) };
        if operator.name.is_none() && operator.reason.is_none() {
            return Ok(None);
        }
        operator.validate()?;
        Ok(Some(operator))
    }

    /// An operator as a record holds it, unchecked: for readers, which accept whatever was
    /// stored.
    pub(crate) fn from_stored(name: Option<String>, reason: Option<String>) -> Self {
        Operator { name, reason }
    }

    /// Its binary form: the name and the reason, each optional, in this order (postcard; the
    /// JSON form leaves an absent one out, which postcard cannot).
    pub(crate) fn wire(&self) -> (Option<&str>, Option<&str>) {
        (self.name.as_deref(), self.reason.as_deref())
    }

    /// The operator's name, if given.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The reason given, if any.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// Checks the rule (see [`Operator`]).
    pub fn validate(&self) -> Result<(), IdError> {
        if self.name.is_none() && self.reason.is_none() {
            return Err(IdError::Empty { what: "operator (name or reason)" });
        }
        if let Some(name) = &self.name {
            bounded("operator name", name, Self::MAX_NAME)?;
        }
        if let Some(reason) = &self.reason {
            bounded("reason", reason, Self::MAX_REASON)?;
        }
        Ok(())
    }
}

/// The provider's handle to go on with a model answer whose stream was cut (a background job
/// id, a response id): `model_aborted.continuation`, so a runtime resumes the answer rather
/// than asks again. Opaque; 1 to [`ContinuationId::MAX_LEN`] bytes holding no character that
/// [acts on text](crate::acts_on_text), checked by [`ContinuationId::new`] and by every append.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ContinuationId(String);

impl ContinuationId {
    /// The longest continuation handle, in bytes.
    pub const MAX_LEN: usize = 1024;

    /// The handle `id`, if it keeps the rule (see [`ContinuationId`]).
    pub fn new(id: impl Into<String>) -> Result<Self, IdError> {
        let id = ContinuationId(id.into());
        id.validate()?;
        Ok(id)
    }

    /// Checks the rule (see [`ContinuationId`]).
    pub fn validate(&self) -> Result<(), IdError> {
        bounded("continuation", &self.0, Self::MAX_LEN)
    }

    /// The handle's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ContinuationId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// 1 to `max` bytes, no character that acts on text.
fn bounded(what: &'static str, text: &str, max: usize) -> Result<(), IdError> {
    if text.is_empty() {
        return Err(IdError::Empty { what });
    }
    if text.len() > max {
        return Err(IdError::TooLong { what, len: text.len(), max });
    }
    crate::ids::keeps_the_rule(what, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_needs_a_name_or_a_reason_and_keeps_the_rule() {
        assert_eq!(Operator::new(None::<String>, None::<String>), Ok(None));
        let op = Operator::new(Some("ana"), Some("stuck refund")).unwrap().unwrap();
        assert_eq!((op.name(), op.reason()), (Some("ana"), Some("stuck refund")));
        let only_why = Operator::new(None::<String>, Some("why")).unwrap().unwrap();
        assert_eq!(only_why.name(), None);
        let err = Operator::new(Some("ana\u{1b}[31m"), None::<String>).unwrap_err();
        assert!(matches!(err, IdError::Forbidden { what: "operator name", at: 3, .. }), "{err}");
        let err = Operator::new(Some("ana"), Some("a\nb")).unwrap_err();
        assert!(matches!(err, IdError::Forbidden { what: "reason", .. }), "{err}");
        let err = Operator::new(Some("x".repeat(201)), None::<String>).unwrap_err();
        assert!(matches!(err, IdError::TooLong { len: 201, max: 200, .. }), "{err}");
        let err = Operator::new(None::<String>, Some("x".repeat(2001))).unwrap_err();
        assert!(matches!(err, IdError::TooLong { len: 2001, max: 2000, .. }), "{err}");
        assert!(Operator::new(Some(""), None::<String>).is_err());
    }

    #[test]
    fn a_continuation_keeps_the_rule() {
        assert_eq!(ContinuationId::new("resp_123").unwrap().as_str(), "resp_123");
        assert!(ContinuationId::new("").is_err());
        assert!(ContinuationId::new("a\u{202e}b").is_err());
        assert!(ContinuationId::new("x".repeat(1025)).is_err());
    }
}
