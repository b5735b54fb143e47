//! Handlers, type-erased: what a tool's body runs, the agents' hooks, and what a call came to.

use std::fmt::{self, Display};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use stepjournal_codec::{RawJson, SessionId};

use super::ctx::CallCtx;

/// A boxed future a handler returns: `Send`, owning what it needs.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A tool's error, as the model is told it (an error result `{"error": message}`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    message: String,
}

impl ToolError {
    /// An error saying `message`.
    pub fn new(message: impl Display) -> Self {
        ToolError { message: message.to_string() }
    }

    /// What it says.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// A remote sub-agent: a child session another service runs for the call.
///
/// The child is keyed on the call's dispatch id ([`CallCtx::dispatch`], the same on every
/// attempt and every run): asked to [`start`](Self::start) again under the same dispatch id, the
/// remote side must hand back the child it started then, never start a second one. After a
/// crash the executor re-attaches to the recorded child ([`attach`](Self::attach)) instead.
pub trait RemoteAgent: Send + Sync + 'static {
    /// Starts the call's child (or finds the one started under this dispatch id) and returns
    /// its session.
    fn start(&self, args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>>;
    /// Waits for the child's result: the call's output.
    fn attach(&self, child: SessionId, ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>>;
}

/// A persistent companion: a child phase the call enters and, after a crash, re-enters.
pub trait Companion: Send + Sync + 'static {
    /// Starts the companion's child for the call (keyed on the dispatch id, as
    /// [`RemoteAgent::start`]) and returns its session.
    fn start(&self, args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>>;
    /// Enters, or re-enters after a crash, the child's phase, and returns what it answers the
    /// call.
    fn reenter(&self, child: SessionId, ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>>;
}

/// What one run of a handler came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The output, recorded as the result.
    Output(RawJson),
    /// An error, recorded as an error result `{"error": text}`.
    Error(String),
}

impl Outcome {
    /// The result to record: the output, and whether it is an error result.
    pub(crate) fn into_result(self) -> (RawJson, bool) {
        match self {
            Outcome::Output(output) => (output, false),
            Outcome::Error(text) => (error_output(&text), true),
        }
    }
}

/// An error result's output: `{"error": text}`.
pub(crate) fn error_output(text: &str) -> RawJson {
    RawJson::from_value(&serde_json::json!({ "error": text })).unwrap_or_else(|_| RawJson::null())
}

/// A body handler with its types erased.
pub(crate) type BodyFn = Arc<dyn Fn(RawJson, CallCtx) -> BoxFuture<Outcome> + Send + Sync>;

/// How a tool's calls are carried out.
#[derive(Clone)]
pub(crate) enum Handler {
    /// A body runs the handler (kinds `tool`, `approval` once approved, `local_agent`).
    Body(BodyFn),
    /// The client executes it: the run suspends until its answer.
    Client,
    /// A remote sub-agent.
    Remote(Arc<dyn RemoteAgent>),
    /// A persistent companion.
    Companion(Arc<dyn Companion>),
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Handler::Body(_) => "Body",
            Handler::Client => "Client",
            Handler::Remote(_) => "Remote",
            Handler::Companion(_) => "Companion",
        })
    }
}

/// `handler` with its types erased: the arguments are deserialized into `T` (a mismatch is an
/// error result saying so), the output serialized, an error written out.
pub(crate) fn erase<T, O, E, F, Fut>(handler: F) -> BodyFn
where
    F: Fn(T, CallCtx) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    T: DeserializeOwned,
    O: Serialize,
    E: Display,
{
    Arc::new(move |args: RawJson, ctx: CallCtx| -> BoxFuture<Outcome> {
        match serde_json::from_str::<T>(args.get()) {
            Err(e) => {
                let said = format!("the arguments do not fit the tool's argument type: {e}");
                Box::pin(std::future::ready(Outcome::Error(said)))
            }
            Ok(args) => {
                let running = handler(args, ctx);
                Box::pin(async move {
                    match running.await {
                        Ok(output) => match RawJson::from_value(&output) {
                            Ok(output) => Outcome::Output(output),
                            Err(e) => Outcome::Error(format!("the tool's output is not JSON: {e}")),
                        },
                        Err(e) => Outcome::Error(e.to_string()),
                    }
                })
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_result_says_the_error_under_one_member() {
        assert_eq!(error_output("no such file").get(), r#"{"error":"no such file"}"#);
        let (output, is_error) = Outcome::Error("boom".into()).into_result();
        assert!(is_error);
        assert_eq!(output.get(), r#"{"error":"boom"}"#);
        assert_eq!(ToolError::new(42).message(), "42");
    }
}
