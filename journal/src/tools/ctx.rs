//! [`CallCtx`]: what a running call's handler is handed.

use std::fmt;
use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use futures_util::task::AtomicWaker;

use stepjournal_codec::{Attempt, CallId, DispatchId, SessionId, ToolName, UnixMillis};

use crate::writer::{Body, CancelSignal, WriteError};

/// The most bytes of text one `output_chunk` holds: text given beyond it within one interval is
/// cut, with a note saying how much, so that the chunk fits a record (16 MiB by default) with
/// its ids, rather than failing the step.
pub(crate) const MAX_OUTPUT_CHUNK_BYTES: usize = 15 << 20;

/// `text` as one chunk holds it: whole, or cut at a character boundary with a note.
fn cut_to_fit(mut text: String) -> String {
    if text.len() <= MAX_OUTPUT_CHUNK_BYTES {
        return text;
    }
    let total = text.len();
    // Room for the note, which is far shorter.
    let mut at = MAX_OUTPUT_CHUNK_BYTES - 256;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    text.truncate(at);
    text.push_str(&format!(
        "\n[stepjournal: the last {} bytes of this output were cut: one output chunk holds at most {MAX_OUTPUT_CHUNK_BYTES} bytes]",
        total - at
    ));
    text
}

/// A running call, as its handler sees it: which call and attempt it is, the keys to put on
/// external effects, throttled output, and the run's cancel signal.
///
/// Cheap to clone; every clone is the same call.
#[derive(Clone)]
pub struct CallCtx {
    inner: Arc<Inner>,
}

struct Inner {
    /// A handle on the call's body, for its output (the executor finishes the body itself).
    body: Body,
    tool: ToolName,
    /// Whole milliseconds between two committed outputs.
    interval: u64,
    /// The output given and not committed yet, and when the last was committed. An async
    /// lock: held across the output's append, so outputs are committed in the order given.
    output: futures_util::lock::Mutex<Output>,
    /// Whether output was left pending (given within its interval, not committed yet): set by
    /// [`CallCtx::output`], cleared when it is committed. The executor's flusher waits on
    /// `woken` for it, then commits the text once its interval has passed.
    pending: AtomicBool,
    woken: AtomicWaker,
}

struct Output {
    pending: String,
    /// When output was last committed (or the body started).
    since: UnixMillis,
}

impl fmt::Debug for CallCtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallCtx")
            .field("session", self.session())
            .field("call", self.call())
            .field("tool", &self.inner.tool)
            .field("dispatch", self.dispatch())
            .field("attempt", &self.attempt())
            .finish_non_exhaustive()
    }
}

impl CallCtx {
    /// The context of a call whose body is `body`, its output committed at most every
    /// `interval`.
    pub(crate) fn new(body: &Body, tool: ToolName, interval: Duration) -> Self {
        let since = body.clock().now();
        let interval = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
        let output = Output { pending: String::new(), since };
        let inner = Inner {
            body: body.twin(),
            tool,
            interval,
            output: output.into(),
            pending: AtomicBool::new(false),
            woken: AtomicWaker::new(),
        };
        CallCtx { inner: Arc::new(inner) }
    }

    /// The session.
    pub fn session(&self) -> &SessionId {
        self.inner.body.session()
    }

    /// The call.
    pub fn call(&self) -> &CallId {
        self.inner.body.call()
    }

    /// The tool called.
    pub fn tool(&self) -> &ToolName {
        &self.inner.tool
    }

    /// The call's dispatch id: the same on every attempt, in every run. Key external effects
    /// on it.
    pub fn dispatch(&self) -> &DispatchId {
        self.inner.body.dispatch()
    }

    /// This body's attempt: 1, 2, ...
    pub fn attempt(&self) -> Attempt {
        self.inner.body.attempt()
    }

    /// The idempotency key to hand an external service: `session:dispatch`.
    pub fn idempotency_key(&self) -> &str {
        self.inner.body.idempotency_key()
    }

    /// The run's cancel signal: fires once the run can no longer write (a newer run or a stop
    /// fenced it, its lease was lost, it was shut down). Stop the work when it fires: nothing
    /// more of this call will be recorded.
    pub fn signal(&self) -> CancelSignal {
        self.inner.body.signal()
    }

    /// Whether the run's cancel signal fired.
    pub fn is_cancelled(&self) -> bool {
        self.signal().is_cancelled()
    }

    /// Says the body is lost: its host went away before it settled (an embedding's event loop
    /// shut down with the body's promise pending, the thread running it died), so nobody can say
    /// whether its effect happened. The run is let go in this process as if it had crashed
    /// ([`Interruption::BodyLost`](crate::Interruption::BodyLost)): its signal fires, nothing
    /// more of it is recorded (the result the handler then returns is refused, not written as
    /// an error result the model would read as a failure), and the `wake` that follows applies
    /// FORMAT.md's rules: an unsafe call is answered `outcome_unknown`, a safe one may run again.
    ///
    /// For hosts, not tools: a tool that failed returns its error.
    pub fn let_go_of_run(&self, why: impl Into<String>) {
        self.inner.body.lose(why.into());
    }

    /// Gives output the tool produced while running. It is committed (`output_chunk`) at most
    /// once per output interval (by the journal's clock), and at least once per interval while
    /// text is pending: the texts given within an interval are joined, in order, into one
    /// chunk, committed by the first call after the interval has passed or, if none comes, by
    /// `drive` once it has passed; what is still pending is committed before the result. If the run is lost,
    /// recovery hands the committed output to the model as the call's partial output.
    ///
    /// Text over 15 MiB within one interval is cut, with a note saying how much: one chunk is
    /// one record.
    ///
    /// Fails with the run's error once it can no longer write (fenced, ended): stop the work.
    ///
    /// **Dropped before it finished**: nothing was written if its batch had not yet been handed
    /// to the store; after that the batch may land unseen, so the run is let go
    /// ([`Interruption::FutureDropped`](crate::Interruption::FutureDropped)): every later write
    /// through it is refused and a `wake` goes on from what landed.
    pub async fn output(&self, text: impl Into<String>) -> Result<(), WriteError> {
        let text = text.into();
        let mut output = self.inner.output.lock().await;
        // Refused at once, not only when the interval's chunk is written: a tool told that its
        // output is kept would go on working for a run that can no longer record it.
        self.inner.body.can_write()?;
        output.pending.push_str(&text);
        let now = self.inner.body.clock().now();
        if now.get().saturating_sub(output.since.get()) < self.inner.interval {
            self.inner.pending.store(true, Ordering::Release);
            self.inner.woken.wake();
            return Ok(());
        }
        self.commit(&mut output, now).await
    }

    /// Commits the text pending in `output` as one chunk (cut to fit), as of `now`.
    async fn commit(&self, output: &mut Output, now: UnixMillis) -> Result<(), WriteError> {
        let chunk = std::mem::take(&mut output.pending);
        output.since = now;
        self.inner.pending.store(false, Ordering::Release);
        self.inner.body.output_chunk_async(cut_to_fit(chunk)).await
    }

    /// Commits what output is pending, if any: before the result.
    pub(crate) async fn flush(&self) -> Result<(), WriteError> {
        let mut output = self.inner.output.lock().await;
        if output.pending.is_empty() {
            self.inner.pending.store(false, Ordering::Release);
            return Ok(());
        }
        let now = self.inner.body.clock().now();
        self.commit(&mut output, now).await
    }

    /// Resolves once output was left pending (given within its interval, not committed).
    pub(crate) async fn output_pending(&self) {
        poll_fn(|cx| {
            if self.inner.pending.load(Ordering::Acquire) {
                return Poll::Ready(());
            }
            self.inner.woken.register(cx.waker());
            if self.inner.pending.load(Ordering::Acquire) { Poll::Ready(()) } else { Poll::Pending }
        })
        .await
    }

    /// Commits the pending output if its interval has passed: `Some(wait)` while it is still
    /// to come (how long until it is due), `None` once nothing is pending.
    ///
    /// Never waits for the output's lock: its holder may be the handler itself, suspended in
    /// [`output`](Self::output) while its chunk is appended, and the executor does not poll the
    /// handler while this runs. A busy lock means output is being committed now: look again
    /// an interval later.
    pub(crate) async fn flush_when_due(&self) -> Result<Option<Duration>, WriteError> {
        let Some(mut output) = self.inner.output.try_lock() else {
            return Ok(Some(Duration::from_millis(self.inner.interval)));
        };
        if output.pending.is_empty() {
            self.inner.pending.store(false, Ordering::Release);
            return Ok(None);
        }
        let now = self.inner.body.clock().now();
        let elapsed = now.get().saturating_sub(output.since.get());
        if elapsed < self.inner.interval {
            return Ok(Some(Duration::from_millis(self.inner.interval - elapsed)));
        }
        self.commit(&mut output, now).await.map(|()| None)
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::expect_used, reason = "tests fail loudly")]

    use super::{MAX_OUTPUT_CHUNK_BYTES, cut_to_fit};

    #[test]
    fn output_over_a_chunk_is_cut_at_a_character_boundary_with_a_note() {
        assert_eq!(cut_to_fit("short".to_owned()), "short");
        let whole = "é".repeat(MAX_OUTPUT_CHUNK_BYTES); // two bytes each: twice the limit
        let cut = cut_to_fit(whole.clone());
        assert!(cut.len() <= MAX_OUTPUT_CHUNK_BYTES, "{}", cut.len());
        let (kept, note) = cut.split_once("\n[stepjournal: ").expect("a note");
        assert!(whole.starts_with(kept) && kept.len() > MAX_OUTPUT_CHUNK_BYTES - 300);
        let cut_bytes = whole.len() - kept.len();
        assert!(
            note.starts_with(&format!("the last {cut_bytes} bytes of this output were cut")),
            "{note}"
        );
    }
}
