//! `NativeCallCtx`: a running call's context as JavaScript sees it (`ctx.sessionId`,
//! `ctx.dispatchId`, `ctx.attempt`, `ctx.idempotencyKey`, `ctx.output(text)`); the package
//! wraps it with an `AbortSignal`.

use napi_derive::napi;
use stepjournal::CallCtx;

use crate::error::thrown;

/// A running call's context.
#[napi]
#[derive(Debug)]
pub struct NativeCallCtx {
    pub(crate) ctx: CallCtx,
    /// Names the body to the abort callback: its `AbortController` is aborted when the run's
    /// cancel signal fires.
    pub(crate) token: u32,
}

#[napi]
impl NativeCallCtx {
    /// The session.
    #[napi(getter)]
    pub fn session_id(&self) -> String {
        self.ctx.session().as_str().to_owned()
    }

    /// The call's id in the reply.
    #[napi(getter)]
    pub fn call_id(&self) -> String {
        self.ctx.call().as_str().to_owned()
    }

    /// The tool called.
    #[napi(getter)]
    pub fn tool(&self) -> String {
        self.ctx.tool().as_str().to_owned()
    }

    /// The call's dispatch id: the same on every attempt, in every run.
    #[napi(getter)]
    pub fn dispatch_id(&self) -> String {
        self.ctx.dispatch().as_str().to_owned()
    }

    /// This body's attempt: 1, 2, ...
    #[napi(getter)]
    pub fn attempt(&self) -> u32 {
        self.ctx.attempt().get()
    }

    /// `session:dispatch`, the key to hand an external service.
    #[napi(getter)]
    pub fn idempotency_key(&self) -> String {
        self.ctx.idempotency_key().to_owned()
    }

    /// The body's token for the abort callback.
    #[napi(getter)]
    pub fn token(&self) -> u32 {
        self.token
    }

    /// Whether the run's cancel signal has fired.
    #[napi(getter)]
    pub fn cancelled(&self) -> bool {
        self.ctx.is_cancelled()
    }

    /// Gives output the tool produced while running (committed at most once per output
    /// interval; what is pending is committed before the result).
    #[napi]
    pub async fn output(&self, text: String) -> napi::Result<()> {
        self.ctx.output(text).await.map_err(thrown)
    }
}
