//! Carrying out one call of a step: its body started (or re-attached to), its handler run with
//! panics caught, its pending output flushed, its result recorded.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use std::pin::pin;

use futures_util::FutureExt;
use futures_util::future::{Either, select};
use stepjournal_codec::{CallId, CallKind, RawJson, SessionId, ToolName};

use super::schedule::How;
use super::timer::sleep;
use crate::tools::{BoxFuture, CallCtx, Handler, Outcome, ToolError, Tools, error_output};
use crate::writer::{Body, Interruption, Refusal, Step, WriteError, in_span};

/// What the executor needs to carry out one call.
pub(crate) struct Job {
    pub(crate) call: CallId,
    pub(crate) tool: ToolName,
    pub(crate) kind: CallKind,
    pub(crate) args: RawJson,
    /// The child the log binds the call to, if any.
    pub(crate) child: Option<SessionId>,
    pub(crate) how: How,
}

/// How the executor runs calls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) output_interval: Duration,
    pub(crate) max_output_bytes: Option<usize>,
}

/// Why a call could not be carried out: a write the run could not make.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) call: CallId,
    pub(crate) doing: &'static str,
    pub(crate) error: WriteError,
}

fn failed<'a>(call: &'a CallId, doing: &'static str) -> impl FnOnce(WriteError) -> Failed + 'a {
    move |error| Failed { call: call.clone(), doing, error }
}

/// Why carrying out a call stopped short.
#[derive(Debug)]
pub(crate) enum Stopped {
    /// A write the run could not make.
    Failed(Failed),
    /// The call's body overran its deadline: the run was let go.
    Overran { call: CallId, after: Duration },
}

/// Carries out `job` on `step`, within `deadline` when there is one: past it the run is let go
/// ([`Interruption::Deadline`]) before the body is dropped, so that whatever the body had in
/// flight is refused.
pub(crate) async fn carry_out_within(
    step: &Step,
    tools: &Tools,
    job: Job,
    limits: Limits,
    deadline: Option<Duration>,
) -> Result<(), Stopped> {
    let call = job.call.clone();
    let work = carry_out(step, tools, job, limits);
    let Some(after) = deadline else { return work.await.map_err(Stopped::Failed) };
    let work = pin!(work);
    let timer = pin!(sleep(after));
    match select(work, timer).await {
        Either::Left((done, _)) => done.map_err(Stopped::Failed),
        // The body's future, pinned here, is dropped when this returns: after the run was let
        // go, so nothing it had in flight is taken for a dropped future's.
        Either::Right(((), _body)) => {
            step.interrupt(Interruption::Deadline { call: call.clone(), after });
            Err(Stopped::Overran { call, after })
        }
    }
}

/// Carries out `job` on `step`: to its result, or to the write that could not be made.
async fn carry_out(step: &Step, tools: &Tools, job: Job, limits: Limits) -> Result<(), Failed> {
    let handler = tools.get(&job.tool).map(|t| t.handler.clone());
    let fits = matches!(
        (&handler, job.kind),
        (Some(Handler::Body(_)), CallKind::Tool | CallKind::Approval | CallKind::LocalAgent)
            | (Some(Handler::Remote(_)), CallKind::RemoteAgent)
            | (Some(Handler::Companion(_)), CallKind::Companion)
    );
    let handler = match handler {
        Some(handler) if fits => handler,
        _ => return without_handler(step, &job, limits).await,
    };
    let body = body_for(step, &job).await?;
    let span = body.span().clone();
    in_span(run_body(step, job, handler, body, limits), &span).await
}

/// Runs the handler in `body` to its result.
async fn run_body(
    step: &Step,
    job: Job,
    handler: Handler,
    body: Body,
    limits: Limits,
) -> Result<(), Failed> {
    let ctx = CallCtx::new(&body, job.tool.clone(), limits.output_interval);
    let work = async {
        Ok::<_, Failed>(match handler {
            Handler::Body(run) => {
                let args = job.args.clone();
                guarded(|| run(args, ctx.clone())).await
            }
            Handler::Remote(agent) => {
                let a = agent.clone();
                let start = move |args, ctx| a.start(args, ctx);
                let attach = move |child, ctx| agent.attach(child, ctx);
                with_child(step, &job, &ctx, start, attach).await?
            }
            Handler::Companion(companion) => {
                let c = companion.clone();
                let start = move |args, ctx| c.start(args, ctx);
                let reenter = move |child, ctx| companion.reenter(child, ctx);
                with_child(step, &job, &ctx, start, reenter).await?
            }
            Handler::Client => Outcome::Error("a client call has no body".to_owned()),
        })
    };
    let outcome = flushing(&ctx, limits.output_interval, work).await?;
    ctx.flush().await.map_err(failed(&job.call, "committing the call's pending output"))?;
    finish(body, outcome, limits).await.map_err(failed(&job.call, "recording the call's result"))
}

/// Runs `work` (a call's handler) while committing the output it left pending once its
/// interval has passed, so that the last text given is not held until the next output or the
/// result. Waits on the output without a timer while none is pending; the commit is awaited
/// to its end, never dropped half-way. With a zero interval every output is committed as it is
/// given, and nothing is left to commit.
async fn flushing<T>(ctx: &CallCtx, interval: Duration, work: impl Future<Output = T>) -> T {
    let mut work = pin!(work);
    if interval.is_zero() {
        return work.await;
    }
    let mut due_in = None;
    loop {
        let wait = match due_in {
            None => Either::Left(ctx.output_pending()),
            Some(wait) => Either::Right(sleep(wait)),
        };
        if let Either::Left((done, _)) = select(work.as_mut(), pin!(wait)).await {
            return done;
        }
        // A commit that fails (the run can no longer write) leaves nothing pending: the
        // handler's own writes and its result meet the same error.
        due_in = ctx.flush_when_due().await.unwrap_or(None);
    }
}

/// The body the job runs in: a new one, or the last one re-attached to (a child running).
async fn body_for(step: &Step, job: &Job) -> Result<Body, Failed> {
    let call = &job.call;
    match job.how {
        How::Run => step.start_body_async(call).await.map_err(failed(call, "starting a body")),
        How::Reattach | How::StartChild | How::Reenter => match step.reattach_async(call).await {
            Ok(body) => Ok(body),
            // No body of it started yet (a child attached before its first body, or a
            // companion with no child): its first body starts now.
            Err(WriteError::Refused(Refusal::NoBodyStarted { .. } | Refusal::NoChild { .. })) => {
                step.start_body_async(call).await.map_err(failed(call, "starting a body"))
            }
            Err(e) => Err(failed(call, "re-attaching to the call's body")(e)),
        },
    }
}

/// A child-holding call (remote sub-agent, companion): its child started through `start`
/// unless the log binds one, recorded (`child_attached`), then waited on through `wait`.
async fn with_child(
    step: &Step,
    job: &Job,
    ctx: &CallCtx,
    start: impl FnOnce(RawJson, CallCtx) -> BoxFuture<Result<SessionId, ToolError>>,
    wait: impl FnOnce(SessionId, CallCtx) -> BoxFuture<Result<RawJson, ToolError>>,
) -> Result<Outcome, Failed> {
    let child = match &job.child {
        Some(child) => child.clone(),
        None => {
            let args = job.args.clone();
            let started = match guarded_raw(|| start(args, ctx.clone())).await {
                Ok(Ok(child)) => child,
                Ok(Err(e)) => return Ok(Outcome::Error(e.to_string())),
                Err(panicked) => return Ok(Outcome::Error(panicked)),
            };
            step.child_attached_async(&job.call, started.clone())
                .await
                .map_err(failed(&job.call, "recording the call's child"))?;
            started
        }
    };
    Ok(match guarded_raw(|| wait(child, ctx.clone())).await {
        Ok(Ok(output)) => Outcome::Output(output),
        Ok(Err(e)) => Outcome::Error(e.to_string()),
        Err(panicked) => Outcome::Error(panicked),
    })
}

/// A call whose tool has no fitting handler now (it was removed, or changed kind since the
/// reply): answered `not_started` if nothing can have run it; otherwise its body records an
/// error result saying so.
async fn without_handler(step: &Step, job: &Job, limits: Limits) -> Result<(), Failed> {
    let call = &job.call;
    match step.skip_async(call).await {
        Ok(()) => return Ok(()),
        Err(WriteError::Refused(Refusal::MayHaveRun { .. })) => {}
        Err(e) => return Err(failed(call, "answering a call with no handler")(e)),
    }
    let body = body_for(step, job).await?;
    let said = format!("tool `{}` has no {} handler in this runtime", job.tool, job.kind.as_str());
    finish(body, Outcome::Error(said), limits)
        .await
        .map_err(failed(call, "recording the call's result"))
}

/// How much of an output too large for the store's record limit is kept, cut ([`cut_output`]).
///
/// [`cut_output`]: crate::writer::body::cut_output
const CUT_TO: usize = 1 << 20;

/// Records `outcome` as the body's result (an over-size output cut to its head, saying so).
async fn finish(body: Body, outcome: Outcome, limits: Limits) -> Result<(), WriteError> {
    let (output, is_error) = outcome.into_result();
    // Kept for the cut below only when it may be too large for a record: results are small.
    let large = (output.get().len() > CUT_TO).then(|| output.clone());
    let finished = match limits.max_output_bytes {
        Some(max) => body.finish_capped_async(output, is_error, max).await.map(|_| ()),
        None => body.finish_async(output, is_error).await,
    };
    match finished {
        Ok(()) => Ok(()),
        // Not storable as it is (over the store's record limit): the same body records the
        // output cut to its head, an error only if the tool's result was one.
        Err(failed) if matches!(*failed.error, WriteError::Encode { .. }) => {
            let recorded = match large {
                Some(output) => (crate::writer::body::cut_output(&output, CUT_TO), is_error),
                None => {
                    let said = format!("the tool's result could not be stored: {}", failed.error);
                    (error_output(&said), true)
                }
            };
            failed.body.finish_async(recorded.0, recorded.1).await.map_err(WriteError::from)
        }
        Err(failed) => Err(WriteError::from(failed)),
    }
}

/// Runs a body handler, a panic (in making the future or in polling it) caught as an error.
async fn guarded(make: impl FnOnce() -> BoxFuture<Outcome>) -> Outcome {
    match guarded_raw(make).await {
        Ok(outcome) => outcome,
        Err(panicked) => Outcome::Error(panicked),
    }
}

/// Runs a handler's future; `Err` says how it panicked.
async fn guarded_raw<T>(make: impl FnOnce() -> BoxFuture<T>) -> Result<T, String> {
    let future = std::panic::catch_unwind(AssertUnwindSafe(make)).map_err(panic_said)?;
    AssertUnwindSafe(future).catch_unwind().await.map_err(panic_said)
}

fn panic_said(payload: Box<dyn Any + Send>) -> String {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a value that is not text".to_owned());
    format!("the tool panicked: {message}")
}
