//! Recovery conformance scenarios (FORMAT.md): reading one, planning it, and checking a plan
//! against a scenario's `expect`.
//!
//! A scenario holds a session's log, the tool registry as it is now, `max_bodies` and one entry.
//! [`Scenario::parse`] never reads `expect`: that member is for checkers ([`check`]) only.

mod check;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use stepjournal_codec::json::{parse_log, type_name};
use stepjournal_codec::{CheckpointId, Coded, Entry, ErrorCode, Event, JsonError, RunId};
use stepjournal_recovery::{Config, NewRun, Plan, fold, plan};

pub use check::{CheckError, check, expect_of};

use crate::registry::{RegistryError, SchemaRegistry};

/// A scenario file that is not FORMAT.md's shape. Each variant names the member (and, for the
/// log, the event's index) at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The text is not JSON.
    #[error("the scenario is not valid JSON: {source}")]
    NotJson {
        /// The parser's error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// The top level is not an object.
    #[error("the scenario must be a JSON object, found {found}")]
    NotAnObject {
        /// The JSON type found.
        found: &'static str,
    },
    /// A required member is missing.
    #[error("the scenario has no `{member}` member")]
    MissingMember {
        /// The member.
        member: &'static str,
    },
    /// A member has the wrong JSON type.
    #[error("the scenario's `{member}` must be {expected}, found {found}")]
    WrongType {
        /// The member.
        member: &'static str,
        /// What it must be.
        expected: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// `max_bodies` is not an integer of at least 1.
    #[error("the scenario's `max_bodies` must be an integer from 1 to 4294967295, found {found}")]
    MaxBodies {
        /// The value found, as JSON.
        found: String,
    },
    /// `tools` is malformed.
    #[error("the scenario's `tools`: {source}")]
    Tools {
        /// What is wrong with it.
        #[from]
        source: RegistryError,
    },
    /// An event of `log` is malformed (its index is in the message).
    #[error("the scenario's `log`: {source}")]
    Log {
        /// What is wrong, and which event.
        #[source]
        source: JsonError,
    },
    /// `entry` is malformed.
    #[error("the scenario's `entry`: {source}")]
    Entry {
        /// What is wrong with it.
        #[source]
        source: serde_json::Error,
    },
}

impl Coded for ScenarioError {
    fn code(&self) -> ErrorCode {
        match self {
            ScenarioError::NotJson { .. }
            | ScenarioError::NotAnObject { .. }
            | ScenarioError::MissingMember { .. }
            | ScenarioError::WrongType { .. }
            | ScenarioError::MaxBodies { .. }
            | ScenarioError::Tools { .. }
            | ScenarioError::Log { .. }
            | ScenarioError::Entry { .. } => ErrorCode::MalformedScenario,
        }
    }
}

/// One scenario, read. `expect` is not part of it.
#[derive(Debug)]
pub struct Scenario {
    /// The scenario's name (`""` when it has none).
    pub name: String,
    /// The tool registry as it is now.
    pub registry: SchemaRegistry,
    /// Recovery's settings (`max_bodies`, default 3).
    pub config: Config,
    /// The session's events, oldest first.
    pub log: Vec<Event>,
    /// The entry to plan.
    pub entry: Entry,
}

#[derive(Deserialize)]
struct Members<'a> {
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tools: Option<&'a RawValue>,
    #[serde(borrow, default)]
    max_bodies: Option<&'a RawValue>,
    #[serde(borrow, default)]
    log: Option<&'a RawValue>,
    #[serde(borrow, default)]
    entry: Option<&'a RawValue>,
}

fn value_of(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

impl Scenario {
    /// Reads a scenario from its JSON text. `expect` is never read.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let top: Value =
            serde_json::from_str(text).map_err(|source| ScenarioError::NotJson { source })?;
        if !top.is_object() {
            return Err(ScenarioError::NotAnObject { found: type_name(&top) });
        }
        let members: Members<'_> =
            serde_json::from_str(text).map_err(|source| ScenarioError::NotJson { source })?;

        let name = match members.name {
            None => String::new(),
            Some(raw) => match value_of(raw) {
                Value::String(s) => s,
                other => {
                    return Err(ScenarioError::WrongType {
                        member: "name",
                        expected: "a string",
                        found: type_name(&other),
                    });
                }
            },
        };
        let tools = members.tools.ok_or(ScenarioError::MissingMember { member: "tools" })?;
        let registry = SchemaRegistry::from_tools_json(&value_of(tools))?;
        let config = match members.max_bodies {
            None => Config::default(),
            Some(raw) => {
                let bad = || ScenarioError::MaxBodies { found: raw.get().to_owned() };
                let n = value_of(raw).as_u64().ok_or_else(bad)?;
                let n = u32::try_from(n).map_err(|_| bad())?;
                Config::new(n).map_err(|_| bad())?
            }
        };
        let log = members.log.ok_or(ScenarioError::MissingMember { member: "log" })?;
        let events: Vec<Box<RawValue>> =
            serde_json::from_str(log.get()).map_err(|_| ScenarioError::WrongType {
                member: "log",
                expected: "an array of events",
                found: type_name(&value_of(log)),
            })?;
        let log = parse_log(&events).map_err(|source| ScenarioError::Log { source })?;
        let entry = members.entry.ok_or(ScenarioError::MissingMember { member: "entry" })?;
        let entry: Entry =
            serde_json::from_str(entry.get()).map_err(|source| ScenarioError::Entry { source })?;
        Ok(Scenario { name, registry, config, log, entry })
    }

    /// The new run a scenario's entry begins, with deterministic ids: the run is `run-N` where N
    /// is one more than the log's `run_started` count, and the commit checkpoint a redirect or a
    /// stop writes is `cp-commit-S`, S being the log's length.
    pub fn new_run(&self) -> NewRun {
        let runs = self.log.iter().filter(|e| matches!(e, Event::RunStarted(_))).count();
        NewRun {
            run: RunId::new(format!("run-{}", runs.saturating_add(1))),
            entry: self.entry.clone(),
            commit_checkpoint: CheckpointId::new(format!("cp-commit-{}", self.log.len())),
        }
    }

    /// The plan: decode (done by [`Scenario::parse`]) → fold → plan, as real recovery does.
    pub fn plan(&self) -> Plan {
        plan(&fold(&self.log), &self.new_run(), &self.registry, &self.config)
    }
}

#[cfg(test)]
mod tests;
