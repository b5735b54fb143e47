//! Who and why: `--as NAME` and `--reason TEXT` of the write commands (`stop`, `answer`,
//! `approve`, `deny`), recorded with what they write (`run_started.by`, a stop's
//! `run_ended.by`), and how the read commands show them.

use clap::Args;
use stepjournal_codec::Operator;

use super::CliError;
use super::shown::Shown;

/// The environment variables `--as` defaults to, in order: the first set and not empty.
pub const OPERATOR_VARS: [&str; 3] = ["STEPJOURNAL_OPERATOR", "USER", "LOGNAME"];

/// `--as` and `--reason`.
#[derive(Debug, Clone, Default, Args)]
pub struct OperatorArgs {
    /// Who acts, recorded with what is written (at most 200 bytes, no control characters).
    /// Default: $STEPJOURNAL_OPERATOR, else $USER, else $LOGNAME, else no one.
    #[arg(long = "as", value_name = "NAME")]
    pub name: Option<String>,
    /// Why, recorded with what is written (at most 2000 bytes, no control characters).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

impl OperatorArgs {
    /// The operator to record, `--as` defaulting to this process's environment; none when
    /// neither a name nor a reason is known. Refused ([`CliError::Usage`]) when either breaks
    /// the rule ([`Operator`]): the message says where and which character, never the text.
    pub fn operator(&self) -> Result<Option<Operator>, CliError> {
        self.operator_with(|var| std::env::var_os(var))
    }

    /// [`operator`](Self::operator) with the environment read through `env`.
    pub fn operator_with(
        &self,
        env: impl Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<Option<Operator>, CliError> {
        let mut from = None;
        let name = match &self.name {
            Some(name) => Some(name.clone()),
            None => {
                let mut found = None;
                for var in OPERATOR_VARS {
                    let Some(value) = env(var).filter(|v| !v.is_empty()) else { continue };
                    let value = value.into_string().map_err(|_| CliError::Usage {
                        option: "--as",
                        reason: format!("its default, ${var}, is not UTF-8: give --as NAME"),
                    })?;
                    from = Some(var);
                    found = Some(value);
                    break;
                }
                found
            }
        };
        let reason = self.reason.clone();
        if let Some(reason) = &reason {
            Operator::new(None::<String>, Some(reason.as_str()))
                .map_err(|e| CliError::Usage { option: "--reason", reason: e.to_string() })?;
        }
        Operator::new(name, reason).map_err(|e| CliError::Usage {
            option: "--as",
            reason: match from {
                Some(var) => format!("its default, ${var}: {e}; give --as NAME"),
                None => e.to_string(),
            },
        })
    }
}

/// Who and why on one line: `by NAME, reason "TEXT"` (either part alone when the other is
/// absent), escaped as every stored text is, a long reason cut.
pub fn operator_text(by: &Operator) -> String {
    const SHOWN: usize = 120;
    let mut text = String::new();
    if let Some(name) = by.name() {
        text.push_str(&format!("by {}", Shown(name)));
    }
    if let Some(reason) = by.reason() {
        if !text.is_empty() {
            text.push_str(", ");
        }
        let cut: String = reason.chars().take(SHOWN).collect();
        let quoted = Shown(serde_json::Value::String(cut).to_string()).to_string();
        text.push_str(&format!("reason {quoted}"));
        if reason.chars().count() > SHOWN {
            text.push_str(&format!("... ({} bytes)", reason.len()));
        }
    }
    text
}

/// Who and why as JSON (`{"name": ..., "reason": ...}`, an absent part left out), or `null`.
pub fn operator_json(by: Option<&Operator>) -> serde_json::Value {
    by.and_then(|b| serde_json::to_value(b).ok()).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]

    use std::ffi::OsString;

    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| OsString::from(*v))
    }

    #[test]
    fn as_defaults_to_the_first_variable_set_and_not_empty() {
        let none = OperatorArgs::default();
        assert_eq!(none.operator_with(env(&[])).unwrap(), None);
        let vars = [("STEPJOURNAL_OPERATOR", ""), ("USER", "ana"), ("LOGNAME", "root")];
        let op = none.operator_with(env(&vars)).unwrap().unwrap();
        assert_eq!(op.name(), Some("ana"));
        let vars = [("STEPJOURNAL_OPERATOR", "oncall-bo"), ("USER", "ana")];
        assert_eq!(none.operator_with(env(&vars)).unwrap().unwrap().name(), Some("oncall-bo"));
        let given = OperatorArgs { name: Some("cy".into()), reason: Some("why".into()) };
        let op = given.operator_with(env(&vars)).unwrap().unwrap();
        assert_eq!((op.name(), op.reason()), (Some("cy"), Some("why")));
        let why_only = OperatorArgs { name: None, reason: Some("why".into()) };
        assert_eq!(why_only.operator_with(env(&[])).unwrap().unwrap().name(), None);
    }

    #[test]
    fn hostile_names_and_reasons_are_refused_without_their_text() {
        let bad = OperatorArgs { name: Some("ana\u{1b}]0;pwned\u{7}".into()), reason: None };
        let err = bad.operator_with(env(&[])).unwrap_err().to_string();
        assert!(err.contains("--as") && err.contains("U+001B"), "{err}");
        assert!(!err.contains('\u{1b}') && !err.contains("pwned"), "{err}");
        let bad = OperatorArgs { name: None, reason: Some("x".repeat(2001)) };
        let err = bad.operator_with(env(&[])).unwrap_err().to_string();
        assert!(err.contains("--reason") && err.contains("2001"), "{err}");
        let vars = [("USER", "a\u{202e}b")];
        let err = OperatorArgs::default().operator_with(env(&vars)).unwrap_err().to_string();
        assert!(err.contains("$USER") && err.contains("U+202E"), "{err}");
    }

    #[test]
    fn who_and_why_are_shown_escaped_and_cut() {
        let op = Operator::new(Some("ana"), Some("stuck \"refund\"")).unwrap().unwrap();
        assert_eq!(operator_text(&op), r#"by ana, reason "stuck \"refund\"""#);
        let long = Operator::new(None::<String>, Some("y".repeat(300))).unwrap().unwrap();
        assert!(operator_text(&long).ends_with("... (300 bytes)"));
        assert_eq!(operator_json(Some(&op))["name"], "ana");
        assert_eq!(operator_json(None), serde_json::Value::Null);
    }
}
