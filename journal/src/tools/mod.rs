//! [`Tools`]: each tool defined once, with its input schema, its replay policy, its kind and
//! its handler. The same value is the registry recovery reads ([`ToolRegistry`]), the `tools`
//! JSON `stepjournal plan --tools` takes ([`Tools::to_tools_json`]), what checks the model's
//! calls before a reply is committed ([`Tools::call`], [`Tools::reply`]), and what the step
//! executor ([`Step::drive`](crate::writer::Step::drive)) runs.
//!
//! ```
//! use serde::Deserialize;
//! use serde_json::json;
//! use stepjournal::codec::Replay;
//! use stepjournal::tools::{CallCtx, ToolError, Tools};
//!
//! #[derive(Deserialize)]
//! struct SetPref { key: String, value: String }
//!
//! let tools = Tools::new()
//!     .tool(
//!         "set_preference",
//!         json!({"type": "object", "required": ["key", "value"]}),
//!         Replay::Safe,
//!         |args: SetPref, ctx: CallCtx| async move {
//!             ctx.output(format!("setting {}", args.key)).await.map_err(ToolError::new)?;
//!             Ok::<_, ToolError>(json!({"ok": true, "value": args.value}))
//!         },
//!     )
//!     .client_tool("pick_seat", json!({"type": "object"}));
//! let call = tools.call("c1", "set_preference", json!({"key": "tz", "value": "UTC"})).unwrap();
//! assert_eq!(call.replay, Replay::Safe);
//! assert!(tools.call("c2", "set_preference", json!({"key": "tz"})).is_err());
//! ```

mod ctx;
mod handler;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use stepjournal_codec::{Call, CallId, CallKind, RawJson, Replay, ToolName};
use stepjournal_recovery::{ArgsCheck, ToolRegistry};

pub use ctx::CallCtx;
pub use handler::{BoxFuture, Companion, RemoteAgent, ToolError};
pub(crate) use handler::{Handler, Outcome, error_output};

use crate::writer::{Refusal, Reply};

/// One tool.
#[derive(Clone)]
pub(crate) struct Tool {
    pub(crate) kind: CallKind,
    pub(crate) replay: Replay,
    input_schema: Value,
    #[cfg(feature = "schema")]
    schema: Arc<crate::registry::Schema>,
    pub(crate) handler: Handler,
}

/// The runtime's tools, each defined once (see the [module](self)). Cheap to clone (each tool's
/// parts are shared).
#[derive(Clone, Default)]
pub struct Tools {
    tools: BTreeMap<ToolName, Tool>,
    /// The tools' own deadlines ([`Tools::deadline`]).
    deadlines: BTreeMap<ToolName, Duration>,
}

impl fmt::Debug for Tools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (name, tool) in &self.tools {
            map.entry(&name.as_str(), &(tool.kind.as_str(), tool.replay.as_str(), &tool.handler));
        }
        map.finish()
    }
}

impl Tools {
    /// No tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives every body of tool `name` this long, from when `drive` begins carrying its call
    /// out; past it, the run is let go as after a crash (see
    /// [`DriveOptions::deadline`](crate::DriveOptions::deadline), the default for tools with
    /// none of their own). Set before or after the tool is added.
    pub fn deadline(mut self, name: impl Into<ToolName>, after: Duration) -> Self {
        self.deadlines.insert(name.into(), after);
        self
    }

    /// Tool `name`'s own deadline, if it has one.
    pub(crate) fn deadline_of(&self, name: &ToolName) -> Option<Duration> {
        self.deadlines.get(name).copied()
    }

    fn with(
        mut self,
        name: impl Into<ToolName>,
        kind: CallKind,
        input_schema: Value,
        replay: Replay,
        handler: Handler,
    ) -> Self {
        #[cfg(feature = "schema")]
        let schema = Arc::new(crate::registry::Schema::compile(Some(&input_schema)));
        let tool = Tool {
            kind,
            replay,
            input_schema,
            #[cfg(feature = "schema")]
            schema,
            handler,
        };
        self.tools.insert(name.into(), tool);
        self
    }

    /// Adds (or replaces) a tool a body runs (kind `tool`): `handler` is an async function of
    /// the typed arguments (deserialized from the call's JSON) and the [`CallCtx`], whose `Ok`
    /// output is the result and whose `Err` is recorded as an error result
    /// `{"error": "<its Display>"}`. `replay` is the policy recovery reads: [`Replay::Safe`]
    /// only if two runs of a body, even overlapping, leave the same effect as one.
    pub fn tool<T, O, E, F, Fut>(
        self,
        name: impl Into<ToolName>,
        input_schema: Value,
        replay: Replay,
        handler: F,
    ) -> Self
    where
        F: Fn(T, CallCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        T: DeserializeOwned,
        O: Serialize,
        E: fmt::Display,
    {
        let handler = Handler::Body(handler::erase(handler));
        self.with(name, CallKind::Tool, input_schema, replay, handler)
    }

    /// Adds a tool the client executes (kind `client`): the run suspends until its answer
    /// ([`Journal::answer_client`](crate::Journal::answer_client)).
    pub fn client_tool(self, name: impl Into<ToolName>, input_schema: Value) -> Self {
        self.with(name, CallKind::Client, input_schema, Replay::Unsafe, Handler::Client)
    }

    /// Adds a tool whose body runs only once approved (kind `approval`): the run suspends until
    /// the decision ([`Journal::decide_approval`](crate::Journal::decide_approval)); approved,
    /// `handler` runs as for [`tool`](Self::tool); denied, the call is answered so.
    pub fn approval_tool<T, O, E, F, Fut>(
        self,
        name: impl Into<ToolName>,
        input_schema: Value,
        replay: Replay,
        handler: F,
    ) -> Self
    where
        F: Fn(T, CallCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        T: DeserializeOwned,
        O: Serialize,
        E: fmt::Display,
    {
        let handler = Handler::Body(handler::erase(handler));
        self.with(name, CallKind::Approval, input_schema, replay, handler)
    }

    /// Adds a remote sub-agent (kind `remote_agent`): a body starts the child through
    /// [`RemoteAgent::start`] (keyed on the dispatch id), records it, and waits for its result
    /// through [`RemoteAgent::attach`]; after a crash the executor re-attaches to the child it
    /// recorded.
    pub fn remote_agent(
        self,
        name: impl Into<ToolName>,
        input_schema: Value,
        replay: Replay,
        agent: impl RemoteAgent,
    ) -> Self {
        let handler = Handler::Remote(Arc::new(agent));
        self.with(name, CallKind::RemoteAgent, input_schema, replay, handler)
    }

    /// Adds a persistent companion (kind `companion`): started once through
    /// [`Companion::start`], entered and re-entered through [`Companion::reenter`].
    pub fn companion(
        self,
        name: impl Into<ToolName>,
        input_schema: Value,
        companion: impl Companion,
    ) -> Self {
        let handler = Handler::Companion(Arc::new(companion));
        self.with(name, CallKind::Companion, input_schema, Replay::Unsafe, handler)
    }

    /// Adds an in-process child agent (kind `local_agent`): its body is `handler`, as for
    /// [`tool`](Self::tool).
    pub fn local_agent<T, O, E, F, Fut>(
        self,
        name: impl Into<ToolName>,
        input_schema: Value,
        replay: Replay,
        handler: F,
    ) -> Self
    where
        F: Fn(T, CallCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        T: DeserializeOwned,
        O: Serialize,
        E: fmt::Display,
    {
        let handler = Handler::Body(handler::erase(handler));
        self.with(name, CallKind::LocalAgent, input_schema, replay, handler)
    }

    /// The tool `name`, if defined.
    pub(crate) fn get(&self, name: &ToolName) -> Option<&Tool> {
        self.tools.get(name)
    }

    /// The tools' names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &ToolName> + '_ {
        self.tools.keys()
    }

    /// The kind of the tool `name`, if defined.
    pub fn kind(&self, name: &ToolName) -> Option<CallKind> {
        self.tools.get(name).map(|t| t.kind)
    }

    /// A call of `tool` the model made, with the kind and the replay policy the registry gives
    /// it (never the caller's): refused when the tool is not defined
    /// ([`Refusal::UnknownTool`]) or the arguments fail its input schema
    /// ([`Refusal::InvalidArguments`]), before anything is committed. `args` is any
    /// serializable value (a `serde_json::Value`, the model's parsed arguments).
    pub fn call(
        &self,
        id: impl Into<CallId>,
        tool: impl Into<ToolName>,
        args: impl Serialize,
    ) -> Result<Call, Refusal> {
        let (id, tool) = (id.into(), tool.into());
        let args = RawJson::from_value(&args).map_err(|e| Refusal::InvalidArguments {
            call: id.clone(),
            tool: tool.clone(),
            reason: format!("the arguments are not JSON: {e}"),
        })?;
        self.checked(Call::new(id, tool, args))
    }

    /// `call` with its kind and replay policy set from the registry (its group and place in the
    /// sequential chain are kept), once its tool is known and its arguments pass the schema.
    pub fn checked(&self, mut call: Call) -> Result<Call, Refusal> {
        let Some(tool) = self.tools.get(&call.tool) else {
            return Err(Refusal::UnknownTool { call: call.call, tool: call.tool });
        };
        if let ArgsCheck::Fail { reason } = self.check_args(&call.tool, &call.args) {
            return Err(Refusal::InvalidArguments { call: call.call, tool: call.tool, reason });
        }
        call.kind = tool.kind;
        call.replay = tool.replay;
        Ok(call)
    }

    /// The model's reply: its text and its calls, each [`checked`](Self::checked). The first
    /// call refused refuses the reply (nothing is committed).
    pub fn reply(
        &self,
        text: impl Into<String>,
        calls: impl IntoIterator<Item = Call>,
    ) -> Result<Reply, Refusal> {
        let calls = calls.into_iter().map(|c| self.checked(c)).collect::<Result<Vec<_>, _>>()?;
        Ok(Reply { text: text.into(), calls, metadata: None })
    }

    /// FORMAT.md's `tools` object, as `stepjournal plan --tools` takes it: each tool's name to
    /// `{"replay": "safe" | "unsafe", "input_schema": SCHEMA}`.
    pub fn to_tools_json(&self) -> Value {
        let tools = self.tools.iter().map(|(name, tool)| {
            let entry = serde_json::json!({
                "replay": tool.replay.as_str(),
                "input_schema": tool.input_schema,
            });
            (name.as_str().to_owned(), entry)
        });
        Value::Object(tools.collect())
    }
}

impl Reply {
    /// The model's reply, each call checked against `tools` (see [`Tools::reply`]).
    pub fn from_model(
        tools: &Tools,
        text: impl Into<String>,
        calls: impl IntoIterator<Item = Call>,
    ) -> Result<Reply, Refusal> {
        tools.reply(text, calls)
    }
}

impl ToolRegistry for Tools {
    fn policy(&self, tool: &ToolName) -> Option<Replay> {
        self.tools.get(tool).map(|t| t.replay)
    }

    /// Checks through the input schema with the `schema` feature; without it every argument
    /// passes (a tool that is not defined fails).
    fn check_args(&self, tool: &ToolName, args: &RawJson) -> ArgsCheck {
        let Some(entry) = self.tools.get(tool) else {
            return ArgsCheck::Fail { reason: format!("tool `{tool}` is not in the registry") };
        };
        #[cfg(feature = "schema")]
        {
            entry.schema.check(args)
        }
        #[cfg(not(feature = "schema"))]
        {
            let _ = (entry, args);
            ArgsCheck::Pass
        }
    }
}
