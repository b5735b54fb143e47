//! Helpers for the tool executor's tests: tools that record what they do, a yield point, and a
//! journal built on them.
#![allow(
    dead_code,
    reason = "each test crate including this module uses a part of it; `expect` would be unfulfilled in some"
)]

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde::Deserialize;
use serde_json::{Value, json};
use stepjournal::backends::JournalStore;
use stepjournal::codec::{RawJson, Replay, SessionId};
use stepjournal::tools::{BoxFuture, CallCtx, Companion, RemoteAgent, ToolError, Tools};
use stepjournal::writer::{IdSource, SequentialIds};
use stepjournal::{Journal, JournalOptions};

/// What the tools did, in order: `start c1`, `end c1`, `effect c1 d-1`, ...
#[derive(Clone, Default)]
pub struct Ledger(Arc<Mutex<Vec<String>>>);

impl Ledger {
    pub fn note(&self, what: impl Into<String>) {
        self.0.lock().unwrap().push(what.into());
    }

    pub fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// Where `what` is in the ledger.
    pub fn at(&self, what: &str) -> usize {
        let entries = self.entries();
        entries
            .iter()
            .position(|e| e == what)
            .unwrap_or_else(|| panic!("no `{what}` in {entries:?}"))
    }

    pub fn has(&self, what: &str) -> bool {
        self.entries().iter().any(|e| e == what)
    }
}

/// Gives the executor a turn: pending once, woken at once.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(move |cx: &mut Context<'_>| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

#[derive(Deserialize)]
pub struct Search {
    pub q: String,
}

pub fn search_schema() -> Value {
    json!({"type": "object", "required": ["q"], "properties": {"q": {"type": "string"}}})
}

/// A search tool: notes its start, yields a few times (letting calls that run concurrently
/// start), notes its end.
pub fn search_tool(
    ledger: &Ledger,
) -> impl Fn(Search, CallCtx) -> BoxFuture<Result<Value, ToolError>> + Send + Sync + 'static {
    let ledger = ledger.clone();
    move |args: Search, ctx: CallCtx| {
        let ledger = ledger.clone();
        Box::pin(async move {
            ledger.note(format!("start {}", ctx.call()));
            for _ in 0..3 {
                yield_now().await;
            }
            ledger.note(format!("end {}", ctx.call()));
            Ok(json!({"hits": args.q.len(), "attempt": ctx.attempt().get()}))
        })
    }
}

/// A remote sub-agent whose children are `child-of-<dispatch>`, noting each start and attach.
pub struct Researcher(pub Ledger);

impl RemoteAgent for Researcher {
    fn start(&self, _args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>> {
        self.0.note(format!("child started for {}", ctx.dispatch()));
        let child = SessionId::new(format!("child-of-{}", ctx.dispatch())).unwrap();
        Box::pin(async move { Ok(child) })
    }

    fn attach(&self, child: SessionId, _ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>> {
        self.0.note(format!("attached to {child}"));
        Box::pin(async move {
            RawJson::from_value(&json!({"report": child.as_str()})).map_err(ToolError::new)
        })
    }
}

/// A companion that notes each start and entry.
pub struct Coach(pub Ledger);

impl Companion for Coach {
    fn start(&self, _args: RawJson, ctx: CallCtx) -> BoxFuture<Result<SessionId, ToolError>> {
        self.0.note(format!("companion started for {}", ctx.dispatch()));
        let child = SessionId::new(format!("coach-{}", ctx.dispatch())).unwrap();
        Box::pin(async move { Ok(child) })
    }

    fn reenter(&self, child: SessionId, _ctx: CallCtx) -> BoxFuture<Result<RawJson, ToolError>> {
        self.0.note(format!("entered {child}"));
        Box::pin(async move { Ok(RawJson::from_value(&json!({"advice": "rest"})).unwrap()) })
    }
}

/// The tools of these tests: `search` and `lookup` (safe), `send_email` (unsafe, notes an
/// effect keyed on its idempotency key), `fail` (errors), `explode` (panics), `ask_user`
/// (client), `delete_account` (approval), `research` (remote agent), `coach` (companion).
pub fn tools(ledger: &Ledger) -> Tools {
    let mail = ledger.clone();
    Tools::new()
        .tool("search", search_schema(), Replay::Safe, search_tool(ledger))
        .tool("lookup", search_schema(), Replay::Safe, search_tool(ledger))
        .tool(
            "send_email",
            json!({"type": "object"}),
            Replay::Unsafe,
            move |_: Value, ctx: CallCtx| {
                let mail = mail.clone();
                async move {
                    mail.note(format!("effect {}", ctx.idempotency_key()));
                    Ok::<_, ToolError>(json!("sent"))
                }
            },
        )
        .tool("fail", json!({}), Replay::Safe, |_: Value, _ctx: CallCtx| async move {
            Err::<Value, _>("the disk is full")
        })
        .tool("explode", json!({}), Replay::Safe, |_: Value, _ctx: CallCtx| async move {
            if true {
                panic!("the parser blew up");
            }
            Ok::<Value, ToolError>(json!(null))
        })
        .client_tool("ask_user", json!({}))
        .approval_tool("delete_account", json!({}), Replay::Unsafe, {
            let ledger = ledger.clone();
            move |_: Value, ctx: CallCtx| {
                let ledger = ledger.clone();
                async move {
                    ledger.note(format!("deleted for {}", ctx.call()));
                    Ok::<_, ToolError>(json!("deleted"))
                }
            }
        })
        .remote_agent("research", json!({}), Replay::Unsafe, Researcher(ledger.clone()))
        .companion("coach", json!({}), Coach(ledger.clone()))
}

pub fn ids() -> Arc<dyn IdSource> {
    Arc::new(SequentialIds::new())
}

/// A journal over `store` whose registry is `tools`.
pub fn journal(store: Arc<dyn JournalStore>, tools: &Tools, ids: Arc<dyn IdSource>) -> Journal {
    Journal::new(separate(store), Arc::new(tools.clone()), JournalOptions::new().ids(ids)).unwrap()
}

/// Runs `future` to its end on this thread.
pub fn run<F: Future>(future: F) -> F::Output {
    futures_executor::block_on(future)
}

/// Polls `future` once: `Some` if it was ready.
pub fn poll_once<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    match Pin::new(future).poll(&mut Context::from_waker(waker)) {
        Poll::Ready(out) => Some(out),
        Poll::Pending => None,
    }
}

/// `store` as another process holds it: each journal of the test stands for a process of its
/// own over the one store.
fn separate(store: Arc<dyn JournalStore>) -> Arc<dyn JournalStore> {
    Arc::new(stepjournal::backends::SeparateProcess(store))
}
