//! The tool registry as JSON Schemas: FORMAT.md's `tools` object, checked with `jsonschema`.

use std::collections::BTreeMap;

use serde_json::Value;
use stepjournal_codec::json::type_name;
use stepjournal_codec::{Coded, ErrorCode, RawJson, Replay, ToolName};
use stepjournal_recovery::{ArgsCheck, ToolRegistry};

/// A `tools` object that does not have FORMAT.md's shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// `tools` is not an object.
    #[error("`tools` must be an object from tool name to tool, found {found}")]
    NotAnObject {
        /// The JSON type found.
        found: &'static str,
    },
    /// A tool is not an object.
    #[error("tool `{tool}` must be an object with `replay` and `input_schema`, found {found}")]
    ToolNotAnObject {
        /// The tool.
        tool: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// A tool's `replay` is neither `"safe"` nor `"unsafe"`.
    #[error("tool `{tool}`: `replay` must be \"safe\" or \"unsafe\", found {found}")]
    BadReplay {
        /// The tool.
        tool: String,
        /// The value found, as JSON.
        found: String,
    },
}

impl Coded for RegistryError {
    fn code(&self) -> ErrorCode {
        match self {
            RegistryError::NotAnObject { .. }
            | RegistryError::ToolNotAnObject { .. }
            | RegistryError::BadReplay { .. } => ErrorCode::InvalidTool,
        }
    }
}

/// A tool's input schema, compiled once.
pub(crate) enum Schema {
    /// No `input_schema`: any arguments pass.
    Any,
    Compiled(Box<jsonschema::Validator>),
    /// The schema does not compile: every argument fails (the careful side).
    Broken(String),
}

impl Schema {
    /// `input_schema` compiled (`None`: any arguments pass).
    pub(crate) fn compile(input_schema: Option<&Value>) -> Self {
        match input_schema {
            None => Schema::Any,
            Some(schema) => match jsonschema::options().build(schema) {
                Ok(validator) => Schema::Compiled(Box::new(validator)),
                Err(e) => Schema::Broken(e.to_string()),
            },
        }
    }

    /// Checks `args` against the schema: the first three errors, each with where it is.
    pub(crate) fn check(&self, args: &RawJson) -> ArgsCheck {
        match self {
            Schema::Any => ArgsCheck::Pass,
            Schema::Broken(e) => ArgsCheck::Fail {
                reason: format!("the input schema does not compile ({e}), so no argument can pass"),
            },
            Schema::Compiled(validator) => {
                let value = match args.to_value() {
                    Ok(value) => value,
                    Err(e) => {
                        return ArgsCheck::Fail {
                            reason: format!("the arguments cannot be read as JSON: {e}"),
                        };
                    }
                };
                let errors: Vec<String> = validator
                    .iter_errors(&value)
                    .take(3)
                    .map(|e| {
                        let at = e.instance_path().to_string();
                        if at.is_empty() { e.to_string() } else { format!("{e} at {at}") }
                    })
                    .collect();
                if errors.is_empty() {
                    ArgsCheck::Pass
                } else {
                    ArgsCheck::Fail { reason: errors.join("; ") }
                }
            }
        }
    }
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Schema::Any => f.write_str("Any"),
            Schema::Compiled(_) => f.write_str("Compiled"),
            Schema::Broken(e) => f.debug_tuple("Broken").field(e).finish(),
        }
    }
}

#[derive(Debug)]
struct Tool {
    replay: Replay,
    schema: Schema,
}

/// The registry as it is now, each tool with its replay policy and its input schema (JSON Schema;
/// draft 2020-12 unless the schema's `$schema` names another). A schema that does not compile
/// makes every argument fail, and is kept in [`SchemaRegistry::compile_errors`] to be reported.
#[derive(Debug, Default)]
pub struct SchemaRegistry {
    tools: BTreeMap<ToolName, Tool>,
}

impl SchemaRegistry {
    /// An empty registry: every tool has been removed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a tool. `input_schema` `None` lets any arguments pass.
    pub fn insert(&mut self, tool: ToolName, replay: Replay, input_schema: Option<&Value>) {
        self.tools.insert(tool, Tool { replay, schema: Schema::compile(input_schema) });
    }

    /// Reads FORMAT.md's `tools` object: tool name to `{ "replay": "safe" | "unsafe",
    /// "input_schema": SCHEMA }`, `replay` absent meaning unsafe and `input_schema` absent meaning
    /// any arguments pass. Unknown members are ignored.
    pub fn from_tools_json(tools: &Value) -> Result<Self, RegistryError> {
        let Value::Object(map) = tools else {
            return Err(RegistryError::NotAnObject { found: type_name(tools) });
        };
        let mut registry = SchemaRegistry::new();
        for (name, tool) in map {
            let Value::Object(tool) = tool else {
                return Err(RegistryError::ToolNotAnObject {
                    tool: name.clone(),
                    found: type_name(tool),
                });
            };
            let replay = match tool.get("replay") {
                None => Replay::Unsafe,
                Some(Value::String(s)) if s == "safe" => Replay::Safe,
                Some(Value::String(s)) if s == "unsafe" => Replay::Unsafe,
                Some(other) => {
                    return Err(RegistryError::BadReplay {
                        tool: name.clone(),
                        found: other.to_string(),
                    });
                }
            };
            registry.insert(ToolName::new(name.as_str()), replay, tool.get("input_schema"));
        }
        Ok(registry)
    }

    /// The tools whose input schema does not compile, with the compiler's message, by name.
    pub fn compile_errors(&self) -> impl Iterator<Item = (&ToolName, &str)> + '_ {
        self.tools.iter().filter_map(|(name, tool)| match &tool.schema {
            Schema::Broken(e) => Some((name, e.as_str())),
            _ => None,
        })
    }

    /// How many tools the registry holds.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the registry holds no tool.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl ToolRegistry for SchemaRegistry {
    fn policy(&self, tool: &ToolName) -> Option<Replay> {
        self.tools.get(tool).map(|t| t.replay)
    }

    fn check_args(&self, tool: &ToolName, args: &RawJson) -> ArgsCheck {
        let Some(entry) = self.tools.get(tool) else {
            return ArgsCheck::Fail { reason: format!("tool `{tool}` is not in the registry") };
        };
        entry.schema.check(args)
    }
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        reason = "a test fails by panicking, on the inputs it built itself"
    )]

    use serde_json::json;

    use super::*;

    fn args(text: &str) -> RawJson {
        RawJson::parse(text).unwrap()
    }

    #[test]
    fn replay_absent_is_unsafe_and_schema_absent_passes_anything() {
        let reg = SchemaRegistry::from_tools_json(&json!({"t": {}})).unwrap();
        let t = ToolName::new("t");
        assert_eq!(reg.policy(&t), Some(Replay::Unsafe));
        assert!(reg.check_args(&t, &args(r#"[1,"x"]"#)).passes());
        assert_eq!(reg.policy(&ToolName::new("gone")), None);
    }

    #[test]
    fn arguments_are_checked_against_the_current_schema_with_a_reason() {
        let schema = json!({"type": "object", "required": ["scope"],
                            "properties": {"scope": {"type": "string"}}});
        let reg = SchemaRegistry::from_tools_json(
            &json!({"t": {"replay": "safe", "input_schema": schema}}),
        )
        .unwrap();
        let t = ToolName::new("t");
        assert_eq!(reg.policy(&t), Some(Replay::Safe));
        assert!(reg.check_args(&t, &args(r#"{"scope":"a"}"#)).passes());
        let ArgsCheck::Fail { reason } = reg.check_args(&t, &args(r#"{"key":"k"}"#)) else {
            panic!("arguments without scope pass")
        };
        assert!(reason.contains("scope"), "{reason}");
    }

    #[test]
    fn draft_2020_12_is_the_default() {
        // `prefixItems` exists only from draft 2020-12 on.
        let schema = json!({"type": "array", "prefixItems": [{"type": "string"}]});
        let reg = SchemaRegistry::from_tools_json(&json!({"t": {"input_schema": schema}})).unwrap();
        assert!(!reg.check_args(&ToolName::new("t"), &args("[1]")).passes());
    }

    #[test]
    fn a_schema_that_does_not_compile_fails_every_argument_and_is_reported() {
        let reg = SchemaRegistry::from_tools_json(
            &json!({"t": {"replay": "safe", "input_schema": {"type": "no-such-type"}}}),
        )
        .unwrap();
        let t = ToolName::new("t");
        assert!(!reg.check_args(&t, &args("{}")).passes());
        let errors: Vec<_> = reg.compile_errors().collect();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].0, &t);
    }

    #[test]
    fn a_malformed_tools_object_names_the_tool() {
        let err = SchemaRegistry::from_tools_json(&json!({"t": {"replay": "maybe"}})).unwrap_err();
        assert!(err.to_string().contains("`t`") && err.to_string().contains("maybe"));
        assert!(SchemaRegistry::from_tools_json(&json!([])).is_err());
        assert!(SchemaRegistry::from_tools_json(&json!({"t": 1})).is_err());
    }
}
