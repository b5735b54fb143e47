//! Between the engine's threads and Python.
//!
//! The engine's futures run on pyo3-async-runtimes' tokio runtime and never take the GIL on the
//! way: what they hand to Python (a result to settle an asyncio future with, a tool body or a
//! callback to start, a body to abort) goes into the [`Inbox`] of the event loop that awaits
//! them, and one byte written to the inbox's socket wakes that loop, which drains the inbox on
//! its own thread with the GIL it already holds (`stepjournal._bridge` registers
//! [`Inbox::drain`] as the socket's reader). A runtime worker waiting for the GIL would stall
//! every session's appends behind the loop's Python code; this way the loop pays one wake-up per
//! batch of deliveries, and the workers only ever wait on the engine.
//!
//! The rare paths that build a Python object off the loop (an error's exception) go through
//! [`with_python`], which the package's `atexit` hook closes ([`finalizing`]): a thread inside
//! Python when the interpreter finalizes is cut off when it next needs the GIL, which aborts the
//! process.

use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::future::{Either, select};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;
use pyo3::{IntoPyObjectExt, intern};
use tokio::sync::oneshot;

/// How often a task waited for is checked for a closed loop.
const LOOP_CHECK: Duration = Duration::from_secs(1);

/// Set by [`finalizing`]: no thread of the runtime enters Python any more.
static FINALIZING: AtomicBool = AtomicBool::new(false);
/// How many calls of [`with_python`] are under way.
static INSIDE: AtomicUsize = AtomicUsize::new(0);

/// Runs `f` attached to the interpreter, unless the interpreter is exiting: then `None`, and
/// nothing of Python is touched.
pub(crate) fn with_python<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    INSIDE.fetch_add(1, Ordering::SeqCst);
    let out = if FINALIZING.load(Ordering::SeqCst) { None } else { Some(Python::attach(f)) };
    INSIDE.fetch_sub(1, Ordering::SeqCst);
    out
}

/// The package's `atexit` hook: from now on no thread of the runtime enters Python; returns once
/// none is inside it (after at most 5 s), the GIL released meanwhile.
#[pyfunction]
pub(crate) fn finalizing(py: Python<'_>) {
    FINALIZING.store(true, Ordering::SeqCst);
    py.detach(|| {
        let until = Instant::now() + Duration::from_secs(5);
        while INSIDE.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// A value for Python, made on the loop's thread.
type Make = Box<dyn for<'py> FnOnce(Python<'py>) -> PyResult<Py<PyAny>> + Send>;
/// A call's arguments, made on the loop's thread.
type MakeArgs = Box<dyn for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyTuple>> + Send>;

/// What a runtime thread hands to the loop.
enum Delivery {
    /// Settle `future` with the value, or with the error.
    Settle { future: Py<PyAny>, value: Result<Make, PyErr> },
    /// Start `function(*args)` (a coroutine function) as a task in `context`; what it comes to
    /// is sent on `reply` (its result, or why it has none).
    Start {
        function: Arc<Py<PyAny>>,
        args: MakeArgs,
        context: Arc<Py<PyAny>>,
        reply: oneshot::Sender<Started>,
    },
    /// Call `function(token)`.
    Abort { function: Arc<Py<PyAny>>, token: u64 },
}

/// An event loop's inbox: what runtime threads hand to it, and the socket that wakes it.
#[pyclass(module = "stepjournal._native", frozen)]
pub(crate) struct Inbox {
    queue: Mutex<Vec<Delivery>>,
    /// A byte is unread on the socket (or about to be written): a delivery need not write one.
    woken: AtomicBool,
    /// The loop reads this end (`loop.add_reader(inbox.fileno(), inbox.drain)`).
    read: UnixStream,
    /// Runtime threads write a byte here to wake the loop.
    write: UnixStream,
}

impl Inbox {
    fn deliver(&self, delivery: Delivery) {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).push(delivery);
        if !self.woken.swap(true, Ordering::SeqCst) {
            // A full socket already holds a wake-up; a closed one means the loop is gone.
            let _ = (&self.write).write(&[1]);
        }
    }
}

#[pymethods]
impl Inbox {
    #[new]
    fn new() -> PyResult<Self> {
        let (read, write) = UnixStream::pair()
            .and_then(|(r, w)| {
                r.set_nonblocking(true)?;
                w.set_nonblocking(true)?;
                Ok((r, w))
            })
            .map_err(|e| PyRuntimeError::new_err(format!("the loop's wake-up socket: {e}")))?;
        Ok(Inbox { queue: Mutex::new(Vec::new()), woken: AtomicBool::new(false), read, write })
    }

    /// The socket the loop watches.
    fn fileno(&self) -> i32 {
        self.read.as_raw_fd()
    }

    /// Handles every delivery (called by the loop when the socket is readable).
    fn drain(&self, py: Python<'_>) -> PyResult<()> {
        let mut sink = [0u8; 256];
        loop {
            match (&self.read).read(&mut sink) {
                Ok(n) if n == sink.len() => continue,
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        self.woken.store(false, Ordering::SeqCst);
        let deliveries =
            std::mem::take(&mut *self.queue.lock().unwrap_or_else(PoisonError::into_inner));
        let bridge = BRIDGE.import(py, "stepjournal._bridge", "BRIDGE")?;
        for delivery in deliveries {
            match delivery {
                Delivery::Settle { future, value } => {
                    let (ok, value) = match value.and_then(|make| make(py)) {
                        Ok(value) => (true, value),
                        Err(e) => (false, e.into_value(py).into_any()),
                    };
                    // A failure to settle one future must not leave the others unsettled.
                    if let Err(e) = bridge.call_method1(intern!(py, "settle"), (future, ok, value))
                    {
                        e.write_unraisable(py, None);
                    }
                }
                Delivery::Start { function, args, context, reply } => match args(py) {
                    Ok(args) => {
                        let sender = Reply { tx: Mutex::new(Some(reply)) };
                        let call = (function.as_ref(), args, context.as_ref(), sender);
                        bridge.call_method1(intern!(py, "start"), call)?;
                    }
                    Err(e) => {
                        let _ = reply.send(Err(format!("its arguments could not be made ({e})")));
                    }
                },
                Delivery::Abort { function, token } => {
                    // The abort callback never raises; a failure leaves the body to finish.
                    drop(function.bind(py).call1((token,)));
                }
            }
        }
        Ok(())
    }
}

/// What a started task came to, read on the loop's thread: its result when it is a `str` (a
/// body's settled JSON; `None` for any other result), or why it has none (the exception it ended
/// with, `CancelledError` for a cancelled one, as text).
pub(crate) type Started = Result<Option<String>, String>;

/// Sends what a started task came to (`stepjournal._bridge` calls it from the task's done
/// callback, or at once when the task could not be started).
#[pyclass(module = "stepjournal._native", frozen)]
pub(crate) struct Reply {
    tx: Mutex<Option<oneshot::Sender<Started>>>,
}

#[pymethods]
impl Reply {
    /// The done callback of the started task: sends its result, or the exception it ended with
    /// (`CancelledError` for a cancelled one).
    fn done(&self, task: Bound<'_, PyAny>) -> PyResult<()> {
        let py = task.py();
        if task.call_method0(intern!(py, "cancelled"))?.is_truthy()? {
            let cancelled = py.import("asyncio")?.getattr("CancelledError")?.call0()?;
            self.send(false, cancelled);
            return Ok(());
        }
        let raised = task.call_method0(intern!(py, "exception"))?;
        if raised.is_none() {
            self.send(true, task.call_method0(intern!(py, "result"))?);
        } else {
            self.send(false, raised);
        }
        Ok(())
    }

    /// `ok`: `value` is the result; else it is the exception the task ended with.
    fn send(&self, ok: bool, value: Bound<'_, PyAny>) {
        let result = if ok {
            Ok(value.extract::<String>().ok())
        } else {
            let kind = value.get_type().name().map(|n| n.to_string()).unwrap_or_default();
            let text = value.str().map(|t| t.to_string()).unwrap_or_default();
            Err(if text.is_empty() { kind } else { format!("{kind}: {text}") })
        };
        if let Some(tx) = self.tx.lock().unwrap_or_else(PoisonError::into_inner).take() {
            // The receiving side gave up (its run was dropped): nothing waits for it.
            let _ = tx.send(result);
        }
    }
}

/// `stepjournal._bridge.BRIDGE`, looked up once.
static BRIDGE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The caller of an engine future: its loop's inbox and its contextvars, for what the future
/// hands to Python.
#[derive(Clone)]
pub(crate) struct Caller {
    inbox: Arc<Py<Inbox>>,
    context: Arc<Py<PyAny>>,
    /// The event loop: a task waited for on a loop that closed never finishes.
    event_loop: Arc<Py<PyAny>>,
}

tokio::task_local! {
    static CALLER: Caller;
}

impl Caller {
    /// The caller of the engine future being polled, if any.
    pub(crate) fn current() -> Option<Caller> {
        CALLER.try_with(Caller::clone).ok()
    }

    fn inbox(&self) -> &Inbox {
        self.inbox.get()
    }

    /// Starts `function(*args)` as a task on the caller's loop, in the caller's context; what it
    /// comes to: its result, or the exception it ended with.
    pub(crate) async fn start(
        &self,
        function: Arc<Py<PyAny>>,
        args: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyTuple>> + Send + 'static,
    ) -> Started {
        let (reply, answer) = oneshot::channel();
        self.inbox().deliver(Delivery::Start {
            function,
            args: Box::new(args),
            context: self.context.clone(),
            reply,
        });
        let mut answer = answer;
        loop {
            let tick = Box::pin(tokio::time::sleep(LOOP_CHECK));
            match select(&mut answer, tick).await {
                Either::Left((got, _)) => {
                    return got.unwrap_or_else(|_| {
                        Err("the event loop went away before the task was started or finished"
                            .to_owned())
                    });
                }
                // Once a second, the GIL taken briefly: a loop closed with the task pending (or
                // before it started) never answers.
                Either::Right(((), _)) if self.loop_closed() => {
                    return Err("its event loop was closed before the task finished".to_owned());
                }
                Either::Right(_) => {}
            }
        }
    }

    /// Whether the caller's loop is closed (or the interpreter exiting).
    fn loop_closed(&self) -> bool {
        with_python(|py| {
            self.event_loop.bind(py).call_method0("is_closed").and_then(|v| v.extract::<bool>())
        })
        .is_none_or(|closed| closed.unwrap_or(true))
    }

    /// Calls `function(token)` on the caller's loop.
    pub(crate) fn abort(&self, function: Arc<Py<PyAny>>, token: u64) {
        self.inbox().deliver(Delivery::Abort { function, token });
    }
}

/// An asyncio future of the running loop, settled with what `work` comes to, which runs on the
/// runtime holding no GIL (with the caller as its task-local, for the tool bodies it starts).
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, work: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let bridge = BRIDGE.import(py, "stepjournal._bridge", "BRIDGE")?;
    let found = bridge.call_method0(intern!(py, "caller"))?;
    let (inbox, context, future, event_loop): (Py<Inbox>, Py<PyAny>, Bound<'py, PyAny>, Py<PyAny>) =
        found.extract()?;
    let caller = Caller {
        inbox: Arc::new(inbox),
        context: Arc::new(context),
        event_loop: Arc::new(event_loop),
    };
    let target = future.clone().unbind();
    let task = CALLER.scope(caller.clone(), async move {
        let value = work.await.map(|v| -> Make { Box::new(move |py| v.into_py_any(py)) });
        caller.inbox().deliver(Delivery::Settle { future: target, value });
    });
    drop(pyo3_async_runtimes::tokio::get_runtime().spawn(task));
    Ok(future)
}
