//! The tools Python defines, as a `Tools` registry whose handlers schedule the Python body (a
//! coroutine function) on the caller's event loop and await its result.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::{Either, select};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Deserialize;
use serde_json::value::RawValue;
use stepjournal::codec::{CallKind, RawJson, Replay, SessionId};
use stepjournal::tools::{BoxFuture, Companion, RemoteAgent};
use stepjournal::{CallCtx, ErrorCode, ToolError, Tools};

use crate::bridge::Caller;
use crate::convert::clip;
use crate::ctx::NativeCallCtx;
use crate::error::coded;

/// A tool as the package hands it over (a dict): `name`, `kind`, `replay`, `input_schema` (JSON
/// text), and the coroutine functions `execute`, `start`, `attach` (each `async def f(text,
/// ctx) -> str`, never raising: the package's wrapper turns what the tool raises into
/// `{"error": message}`), and `timeout_ms`.
pub(crate) struct ToolDef {
    name: String,
    kind: String,
    replay: String,
    input_schema: String,
    execute: Option<Py<PyAny>>,
    start: Option<Py<PyAny>>,
    attach: Option<Py<PyAny>>,
    timeout_ms: Option<u64>,
}

impl ToolDef {
    /// The definition in `dict`.
    pub(crate) fn from_dict(dict: &Bound<'_, PyAny>) -> PyResult<Self> {
        let dict = dict.cast::<PyDict>().map_err(|_| {
            coded(ErrorCode::InvalidTool, "each tool must be handed over as a dict")
        })?;
        let item = |key: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
            Ok(dict.get_item(key)?.filter(|v| !v.is_none()))
        };
        let text = |key: &str| -> PyResult<String> {
            match item(key)? {
                Some(v) => v.extract::<String>().map_err(|_| {
                    coded(ErrorCode::InvalidTool, format!("a tool's `{key}` must be a string"))
                }),
                None => Err(coded(ErrorCode::InvalidTool, format!("a tool needs `{key}`"))),
            }
        };
        let function =
            |key: &str| -> PyResult<Option<Py<PyAny>>> { Ok(item(key)?.map(Bound::unbind)) };
        let timeout_ms = match item("timeout_ms")? {
            Some(v) => Some(v.extract::<u64>().map_err(|_| {
                coded(
                    ErrorCode::InvalidTool,
                    "a tool's `timeout_ms` must be a whole number of milliseconds",
                )
            })?),
            None => None,
        };
        Ok(ToolDef {
            name: text("name")?,
            kind: text("kind")?,
            replay: text("replay")?,
            input_schema: text("input_schema")?,
            execute: function("execute")?,
            start: function("start")?,
            attach: function("attach")?,
            timeout_ms,
        })
    }
}

/// What a Python body came to.
#[derive(Deserialize)]
struct Settled {
    /// The error's message, for a body that raised.
    #[serde(default)]
    error: Option<String>,
    /// The result.
    #[serde(default)]
    ok: Option<Box<RawValue>>,
    /// Why the body's result cannot be recorded (not JSON: a set, NaN, an object): the body
    /// ran, so neither an error result nor a made-up value is written.
    #[serde(default)]
    unrecordable: Option<String>,
}

/// Tokens naming running bodies to the abort callback.
static TOKENS: AtomicU64 = AtomicU64::new(1);

/// The registry of `defs`, each body calling its Python coroutine function; `abort(token)` is
/// called on the event loop when a running body's run can no longer write.
pub(crate) fn tools(defs: Vec<ToolDef>, abort: Py<PyAny>) -> PyResult<Tools> {
    let abort = Arc::new(abort);
    let mut tools = Tools::new();
    let mut names = HashSet::with_capacity(defs.len());
    for def in defs {
        // A second definition would replace the first, policy and all: refused instead.
        if !names.insert(def.name.clone()) {
            return Err(coded(
                ErrorCode::InvalidTool,
                format!("tool `{}` is defined twice: give each tool one definition", def.name),
            ));
        }
        let schema: serde_json::Value = serde_json::from_str(&def.input_schema).map_err(|e| {
            coded(
                ErrorCode::InvalidTool,
                format!("tool `{}`'s input schema is not JSON: {e}", def.name),
            )
        })?;
        // The kind and the policy are read by the library's own names (the codec's `CallKind`
        // and `Replay`): the binding keeps no list of them.
        let kind: CallKind = named(&def.name, "kind", &def.kind)?;
        let replay: Replay = named(&def.name, "replay", &def.replay)?;
        let name = def.name.clone();
        let kind_text = def.kind.clone();
        let body = |execute: Option<Py<PyAny>>| {
            execute.map(Arc::new).ok_or_else(|| {
                coded(
                    ErrorCode::InvalidTool,
                    format!("tool `{name}` of kind `{kind_text}` needs `execute`"),
                )
            })
        };
        if let Some(ms) = def.timeout_ms {
            tools = tools.deadline(def.name.clone(), Duration::from_millis(ms));
        }
        tools = match kind {
            CallKind::Client => tools.client_tool(def.name, schema),
            CallKind::Tool => {
                tools.tool(def.name.clone(), schema, replay, handler(body(def.execute)?, &abort))
            }
            CallKind::Approval => tools.approval_tool(
                def.name.clone(),
                schema,
                replay,
                handler(body(def.execute)?, &abort),
            ),
            CallKind::LocalAgent => tools.local_agent(
                def.name.clone(),
                schema,
                replay,
                handler(body(def.execute)?, &abort),
            ),
            CallKind::RemoteAgent => {
                let child = PyChild::of(&def.name, def.start, def.attach, &abort)?;
                tools.remote_agent(def.name, schema, replay, child)
            }
            CallKind::Companion => {
                let child = PyChild::of(&def.name, def.start, def.attach, &abort)?;
                tools.companion(def.name, schema, child)
            }
        };
    }
    Ok(tools)
}

/// `value` read as the library reads the tool's `what` (a kind, a replay policy): an unknown
/// one is refused with the library's own list of names.
fn named<T: serde::de::DeserializeOwned>(tool: &str, what: &str, value: &str) -> PyResult<T> {
    serde_json::from_value(serde_json::Value::String(value.to_owned())).map_err(|e| {
        coded(ErrorCode::InvalidTool, format!("tool `{tool}`: {what} `{}`: {e}", clip(value)))
    })
}

type Handled = futures_util::future::BoxFuture<'static, Result<Box<RawValue>, String>>;

/// The handler calling `body`.
fn handler(
    body: Arc<Py<PyAny>>,
    abort: &Arc<Py<PyAny>>,
) -> impl Fn(Box<RawValue>, CallCtx) -> Handled + Send + Sync + 'static {
    let abort = abort.clone();
    move |args: Box<RawValue>, ctx: CallCtx| -> Handled {
        let (body, abort) = (body.clone(), abort.clone());
        Box::pin(async move { call_py(&body, &abort, args.get().to_owned(), ctx).await })
    }
}

/// Calls the coroutine function `body` with `input` and the call's context, schedules the
/// coroutine on the event loop of the task driving the step (the caller's), and awaits its
/// result: the output, or the error to record. When the run's cancel signal fires first,
/// `abort(token)` is called on the loop (the body's `ctx.cancelled` event is set) and the result
/// still awaited (the writer then refuses it: the run is fenced).
///
/// The package's wrapper settles every coroutine it returns (what the tool raises becomes
/// `{"error": ...}`), so a coroutine that cannot be scheduled or that ends without a result
/// (cancelled, its loop closed) means the body was lost: nobody knows what it did, so the run is
/// let go as after a crash ([`CallCtx::let_go_of_run`]) and nothing of the call is recorded,
/// never an error result the model would read as the tool's failure.
async fn call_py(
    body: &Arc<Py<PyAny>>,
    abort: &Arc<Py<PyAny>>,
    input: String,
    ctx: CallCtx,
) -> Result<Box<RawValue>, String> {
    let token = TOKENS.fetch_add(1, Ordering::Relaxed);
    let signal = ctx.signal();
    let native = NativeCallCtx { ctx: ctx.clone(), token };
    let lost = |why: String| {
        ctx.let_go_of_run(why.clone());
        why
    };
    let Some(caller) = Caller::current() else {
        return Err(lost(
            "no event loop drives this step (it was not driven from Python)".to_owned(),
        ));
    };
    let started = caller.start(body.clone(), move |py| (input, native).into_pyobject(py));
    let started = Box::pin(started);
    let settled = match select(started, Box::pin(signal.cancelled())).await {
        Either::Left((settled, _)) => settled,
        Either::Right(((), started)) => {
            caller.abort(abort.clone(), token);
            started.await
        }
    };
    let text = match settled {
        Ok(Some(text)) => text,
        Ok(None) => {
            return Err(lost(
                "its coroutine returned something other than the settled JSON".to_owned(),
            ));
        }
        Err(why) => return Err(lost(format!("its coroutine ended without a result ({why})"))),
    };
    // A result that cannot be recorded lets go of the run, as a lost body does: the body's
    // effect may have happened, so the `wake` that follows decides the call by the rules (an
    // unsafe one `outcome_unknown`), never an error result.
    match serde_json::from_str::<Settled>(&text) {
        Ok(Settled { unrecordable: Some(why), .. }) => {
            Err(lost(format!("its result cannot be recorded: {why}")))
        }
        Ok(Settled { error: Some(error), .. }) => Err(error),
        Ok(Settled { ok: Some(ok), .. }) => Ok(ok),
        // `{"ok": null}`: a body that returned None.
        Ok(_) => RawValue::from_string("null".to_owned()).map_err(|e| e.to_string()),
        Err(e) => Err(lost(format!("its result cannot be recorded: it is not JSON ({e})"))),
    }
}

/// A child-holding tool (`remote_agent`, `companion`) whose `start` and `attach` (or
/// `reenter`) are Python coroutine functions.
struct PyChild {
    start: Arc<Py<PyAny>>,
    attach: Arc<Py<PyAny>>,
    abort: Arc<Py<PyAny>>,
}

impl PyChild {
    fn of(
        name: &str,
        start: Option<Py<PyAny>>,
        attach: Option<Py<PyAny>>,
        abort: &Arc<Py<PyAny>>,
    ) -> PyResult<Self> {
        match (start, attach) {
            (Some(start), Some(attach)) => Ok(PyChild {
                start: Arc::new(start),
                attach: Arc::new(attach),
                abort: abort.clone(),
            }),
            _ => Err(coded(
                ErrorCode::InvalidTool,
                format!("tool `{name}` needs `start` and `attach` (or `reenter`) functions"),
            )),
        }
    }

    fn start_child(&self, args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>> {
        let (start, abort) = (self.start.clone(), self.abort.clone());
        Box::pin(async move {
            let out = call_py(&start, &abort, args.get().to_owned(), ctx).await;
            let out = out.map_err(ToolError::new)?;
            let id: String = serde_json::from_str(out.get()).map_err(|_| {
                ToolError::new(format!(
                    "start must return the child's session id, a string (it gave {})",
                    clip(out.get())
                ))
            })?;
            SessionId::new(id).map_err(|e| ToolError::new(format!("the child's session id: {e}")))
        })
    }

    fn wait_child(&self, child: SessionId, ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>> {
        let (attach, abort) = (self.attach.clone(), self.abort.clone());
        Box::pin(async move {
            let out = call_py(&attach, &abort, child.as_str().to_owned(), ctx).await;
            let out = out.map_err(ToolError::new)?;
            RawJson::from_raw(&out).map_err(ToolError::new)
        })
    }
}

impl RemoteAgent for PyChild {
    fn start(&self, args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>> {
        self.start_child(args, ctx)
    }

    fn attach(&self, child: SessionId, ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>> {
        self.wait_child(child, ctx)
    }
}

impl Companion for PyChild {
    fn start(&self, args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>> {
        self.start_child(args, ctx)
    }

    fn reenter(&self, child: SessionId, ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>> {
        self.wait_child(child, ctx)
    }
}
