//! The tools JavaScript defines, as a `Tools` registry whose handlers call the JavaScript
//! `execute` on the event loop through thread-safe functions and await the Promise it returns.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::future::{Either, select};
use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde::Deserialize;
use serde_json::value::RawValue;
use stepjournal::codec::{CallKind, RawJson, Replay, SessionId};
use stepjournal::tools::{BoxFuture, Companion, RemoteAgent};
use stepjournal::{CallCtx, ToolError, Tools};

use crate::convert::clip;

use crate::ctx::NativeCallCtx;
use crate::error::coded;
use stepjournal::ErrorCode;

/// A JavaScript body: called with the arguments' JSON text and the context, it returns a
/// Promise of `{"ok": value}` or `{"error": message}` as JSON text (it never rejects: the
/// package's wrapper catches what `execute` throws). Weak: it does not keep node running.
pub type BodyFn = ThreadsafeFunction<
    (String, NativeCallCtx),
    Promise<String>,
    (String, NativeCallCtx),
    napi::Status,
    false,
    true,
>;

/// Aborts the `AbortController` of the body with this token.
pub type AbortFn = ThreadsafeFunction<u32, (), u32, napi::Status, false, true>;

/// A tool as JavaScript defines it.
#[napi(object, object_to_js = false)]
pub struct ToolDef {
    /// The tool's name.
    pub name: String,
    /// `tool`, `client`, `approval` or `local_agent`.
    pub kind: String,
    /// `safe` or `unsafe`.
    pub replay: String,
    /// The input JSON Schema, as JSON text.
    pub input_schema: String,
    /// The body (`tool`, `approval`, `local_agent`).
    pub execute: Option<BodyFn>,
    /// Starts the call's child (`remote_agent`, `companion`), keyed on the dispatch id: called
    /// with the arguments' JSON text, it settles with the child's session id.
    pub start: Option<BodyFn>,
    /// Waits for the child's result (`remote_agent`: attach; `companion`: re-enter): called with
    /// the child's session id, it settles with the call's output.
    pub attach: Option<BodyFn>,
    /// How long one body may run: past it the run is let go as after a crash and the late
    /// body's result refused ([`Tools::deadline`]).
    pub timeout_ms: Option<u32>,
}

impl std::fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDef")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("replay", &self.replay)
            .field("execute", &self.execute.is_some())
            .field("start", &self.start.is_some())
            .field("attach", &self.attach.is_some())
            .field("timeout_ms", &self.timeout_ms)
            .finish_non_exhaustive()
    }
}

/// What a JavaScript body came to.
#[derive(Deserialize)]
struct Settled {
    /// The error's message, for a body that threw.
    #[serde(default)]
    error: Option<String>,
    /// The result.
    #[serde(default)]
    ok: Option<Box<RawValue>>,
    /// Why the body's result cannot be recorded (not JSON: a BigInt, a cycle, a function, ...):
    /// the body ran, so neither an error result nor a made-up value is written.
    #[serde(default)]
    unrecordable: Option<String>,
}

/// Tokens naming running bodies to the abort callback.
static TOKENS: AtomicU32 = AtomicU32::new(1);

/// The registry of `defs`, each body calling its JavaScript `execute`.
pub(crate) fn tools(defs: Vec<ToolDef>, abort: AbortFn) -> napi::Result<Tools> {
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
        let body = || {
            def.execute.map(Arc::new).ok_or_else(|| {
                coded(
                    ErrorCode::InvalidTool,
                    format!("tool `{}` of kind `{}` needs `execute`", def.name, def.kind),
                )
            })
        };
        if let Some(ms) = def.timeout_ms {
            tools = tools.deadline(def.name.clone(), Duration::from_millis(u64::from(ms)));
        }
        tools = match kind {
            CallKind::Client => tools.client_tool(def.name, schema),
            CallKind::Tool => {
                tools.tool(def.name.clone(), schema, replay, handler(body()?, abort.clone()))
            }
            CallKind::Approval => tools.approval_tool(
                def.name.clone(),
                schema,
                replay,
                handler(body()?, abort.clone()),
            ),
            CallKind::LocalAgent => {
                tools.local_agent(def.name.clone(), schema, replay, handler(body()?, abort.clone()))
            }
            CallKind::RemoteAgent => {
                let child = JsChild::of(&def.name, def.start, def.attach, abort.clone())?;
                tools.remote_agent(def.name, schema, replay, child)
            }
            CallKind::Companion => {
                let child = JsChild::of(&def.name, def.start, def.attach, abort.clone())?;
                tools.companion(def.name, schema, child)
            }
        };
    }
    Ok(tools)
}

/// `value` read as the library reads the tool's `what` (a kind, a replay policy): an unknown
/// one is refused with the library's own list of names.
fn named<T: serde::de::DeserializeOwned>(tool: &str, what: &str, value: &str) -> napi::Result<T> {
    serde_json::from_value(serde_json::Value::String(value.to_owned())).map_err(|e| {
        coded(ErrorCode::InvalidTool, format!("tool `{tool}`: {what} `{}`: {e}", clip(value)))
    })
}

type Handled = futures_util::future::BoxFuture<'static, Result<Box<RawValue>, String>>;

/// The handler calling `body`: the call goes to the event loop, the returned Promise is awaited
/// here; when the run's cancel signal fires first, the body's `AbortController` is aborted and
/// the Promise still awaited (its result is then refused by the writer: the run is fenced).
///
/// The package's wrapper settles every Promise it returns (a throw becomes `{"error": ...}`), so
/// a Promise that fails to settle, or a body that cannot be called, means the event loop went
/// away with the body pending (node exiting): nobody knows what the body did, so the run is let
/// go as after a crash ([`CallCtx::let_go_of_run`]) and nothing of the call is recorded, never
/// an error result the model would read as the tool's failure.
fn handler(
    body: Arc<BodyFn>,
    abort: Arc<AbortFn>,
) -> impl Fn(Box<RawValue>, CallCtx) -> Handled + Send + Sync + 'static {
    move |args: Box<RawValue>, ctx: CallCtx| -> Handled {
        let (body, abort) = (body.clone(), abort.clone());
        Box::pin(async move { call_js(&body, &abort, args.get().to_owned(), ctx).await })
    }
}

/// Calls the JavaScript function `body` with `input` and the call's context on the event loop
/// and awaits the Promise it returns: the output, or the error to record.
async fn call_js(
    body: &BodyFn,
    abort: &AbortFn,
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
    let promise = body
        .call_async((input, native))
        .await
        .map_err(|e| lost(format!("its JavaScript function could not be called ({e})")))?;
    let promise = Box::pin(promise);
    let settled = match select(promise, Box::pin(signal.cancelled())).await {
        Either::Left((settled, _)) => settled,
        Either::Right(((), promise)) => {
            abort.call(token, ThreadsafeFunctionCallMode::NonBlocking);
            promise.await
        }
    };
    let text = settled.map_err(|e| {
                lost(format!("its Promise can never settle: it was collected unsettled, or the event loop went away ({e})"))
            })?;
    // A result that cannot be recorded lets go of the run, as a lost body does: the
    // body's effect may have happened, so the `wake` that follows decides the call by
    // the rules (an unsafe one `outcome_unknown`), never an error result.
    match serde_json::from_str::<Settled>(&text) {
        Ok(Settled { unrecordable: Some(why), .. }) => {
            Err(lost(format!("its result cannot be recorded: {why}")))
        }
        Ok(Settled { error: Some(error), .. }) => Err(error),
        Ok(Settled { ok: Some(ok), .. }) => Ok(ok),
        // `{"ok": null}`: a body that returned nothing.
        Ok(_) => RawValue::from_string("null".to_owned()).map_err(|e| e.to_string()),
        Err(e) => Err(lost(format!("its result cannot be recorded: it is not JSON ({e})"))),
    }
}

/// A child-holding tool (`remote_agent`, `companion`) whose `start` and `attach` (or `reenter`)
/// are JavaScript functions.
struct JsChild {
    start: Arc<BodyFn>,
    attach: Arc<BodyFn>,
    abort: Arc<AbortFn>,
}

impl JsChild {
    fn of(
        name: &str,
        start: Option<BodyFn>,
        attach: Option<BodyFn>,
        abort: Arc<AbortFn>,
    ) -> napi::Result<Self> {
        match (start, attach) {
            (Some(start), Some(attach)) => {
                Ok(JsChild { start: Arc::new(start), attach: Arc::new(attach), abort })
            }
            _ => Err(coded(
                ErrorCode::InvalidTool,
                format!("tool `{name}` needs `start` and `attach` (or `reenter`) functions"),
            )),
        }
    }

    fn start_child(&self, args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>> {
        let (start, abort) = (self.start.clone(), self.abort.clone());
        Box::pin(async move {
            let out = call_js(&start, &abort, args.get().to_owned(), ctx).await;
            let out = out.map_err(ToolError::new)?;
            let id: String = serde_json::from_str(out.get()).map_err(|_| {
                ToolError::new(format!(
                    "start must settle with the child's session id, a string (it gave {})",
                    clip(out.get())
                ))
            })?;
            SessionId::new(id).map_err(|e| ToolError::new(format!("the child's session id: {e}")))
        })
    }

    fn wait_child(&self, child: SessionId, ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>> {
        let (attach, abort) = (self.attach.clone(), self.abort.clone());
        Box::pin(async move {
            let out = call_js(&attach, &abort, child.as_str().to_owned(), ctx).await;
            let out = out.map_err(ToolError::new)?;
            RawJson::from_raw(&out).map_err(ToolError::new)
        })
    }
}

impl RemoteAgent for JsChild {
    fn start(&self, args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>> {
        self.start_child(args, ctx)
    }

    fn attach(&self, child: SessionId, ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>> {
        self.wait_child(child, ctx)
    }
}

impl Companion for JsChild {
    fn start(&self, args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>> {
        self.start_child(args, ctx)
    }

    fn reenter(&self, child: SessionId, ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>> {
        self.wait_child(child, ctx)
    }
}
