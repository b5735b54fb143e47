//! `NativeJournal`: a journal over a store URL, with the Python tools.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use serde_json::json;
use stepjournal::backends::{Durability, OpenOptions, OwnerId, open_url};
use stepjournal::codec::json::record_to_export_line;
use stepjournal::codec::{CallId, CheckpointId, Operator, RawJson, SessionId};
use stepjournal::recovery::Config;
use stepjournal::{ErrorCode, Journal, JournalOptions, Tools};

use crate::convert;
use crate::error::{coded, thrown};
use crate::run::NativeRun;
use crate::tools::{ToolDef, tools};

/// A journal: the session writer over one store, with the tools it drives with.
#[pyclass(module = "stepjournal._native", frozen)]
pub(crate) struct NativeJournal {
    pub(crate) journal: Journal,
    pub(crate) tools: Tools,
}

/// `ms` as a duration when it is at least 1.
fn at_least_one_ms(ms: u64, what: &str) -> PyResult<Duration> {
    if ms == 0 {
        return Err(coded(
            ErrorCode::InvalidOptions,
            format!("{what} must be a whole number of milliseconds, at least 1"),
        ));
    }
    Ok(Duration::from_millis(ms))
}

/// The journal's options from the keyword arguments of [`open`].
#[expect(clippy::too_many_arguments, reason = "the keyword arguments of `open`, each an option")]
fn options(
    durability: Option<&str>,
    max_bodies: Option<u32>,
    lease_ttl_ms: Option<u64>,
    owner: Option<String>,
    snapshot_every: Option<u32>,
    snapshot_after_bytes: Option<u64>,
    retain_ended_for_ms: Option<u64>,
    operator: Option<(Option<String>, Option<String>)>,
) -> PyResult<JournalOptions> {
    let mut options = JournalOptions::new();
    match durability {
        None | Some("synced") => options = options.durability(Durability::Synced),
        Some("buffered") => options = options.durability(Durability::Buffered),
        Some(other) => {
            return Err(coded(
                ErrorCode::InvalidOptions,
                format!("durability `{}` is neither `synced` nor `buffered`", convert::clip(other)),
            ));
        }
    }
    if let Some(max) = max_bodies {
        let recovery = Config::new(max).map_err(|e| coded(ErrorCode::InvalidOptions, e))?;
        options = options.recovery(recovery);
    }
    if let Some(ms) = lease_ttl_ms {
        options = options.lease_ttl(at_least_one_ms(ms, "lease_ttl")?);
    }
    if let Some(owner) = owner {
        if owner.trim().is_empty() {
            return Err(coded(ErrorCode::InvalidOptions, "owner must be a non-empty string"));
        }
        options = options.owner(OwnerId::new(owner));
    }
    if let Some(steps) = snapshot_every {
        options = options.snapshot_every(steps);
    }
    if let Some(bytes) = snapshot_after_bytes {
        options = options.snapshot_after_bytes(bytes);
    }
    if let Some(ms) = retain_ended_for_ms {
        options = options.retain_ended_for(at_least_one_ms(ms, "retain_ended_for")?);
    }
    if let Some((name, reason)) = operator {
        let operator = Operator::new(name, reason).map_err(|e| coded(ErrorCode::InvalidId, e))?;
        options = options.operator(operator);
    }
    Ok(options)
}

/// Opens the store `url` names (`file:PATH`, `sqlite:PATH`, `postgres://...`) for writing and a
/// journal over it with `defs` as its tools; `abort(token)` is called on the event loop when a
/// running body's run can no longer write. An awaitable of the journal.
#[pyfunction]
#[pyo3(signature = (url, defs, abort, *, durability=None, max_bodies=None, create=true,
    lease_ttl_ms=None, owner=None, snapshot_every=None, snapshot_after_bytes=None,
    retain_ended_for_ms=None, operator=None))]
#[expect(clippy::too_many_arguments, reason = "the keyword arguments of `open`, each an option")]
pub(crate) fn open<'py>(
    py: Python<'py>,
    url: String,
    defs: Vec<Bound<'py, PyAny>>,
    abort: Py<PyAny>,
    durability: Option<String>,
    max_bodies: Option<u32>,
    create: bool,
    lease_ttl_ms: Option<u64>,
    owner: Option<String>,
    snapshot_every: Option<u32>,
    snapshot_after_bytes: Option<u64>,
    retain_ended_for_ms: Option<u64>,
    operator: Option<(Option<String>, Option<String>)>,
) -> PyResult<Bound<'py, PyAny>> {
    let defs = defs.iter().map(ToolDef::from_dict).collect::<PyResult<Vec<_>>>()?;
    let tools = tools(defs, abort)?;
    let options = options(
        durability.as_deref(),
        max_bodies,
        lease_ttl_ms,
        owner,
        snapshot_every,
        snapshot_after_bytes,
        retain_ended_for_ms,
        operator,
    )?;
    crate::bridge::awaitable(py, async move {
        let open_options = if create { OpenOptions::create() } else { OpenOptions::default() };
        let store = open_url(&url, open_options).map_err(thrown)?;
        let journal = Journal::new(store, Arc::new(tools.clone()), options).map_err(thrown)?;
        Ok(NativeJournal { journal, tools })
    })
}

/// Plans a conformance scenario (FORMAT.md) as `stepjournal plan --scenario` does: the plan as
/// one JSON object's text.
#[pyfunction]
pub(crate) fn plan_scenario(py: Python<'_>, text: String) -> PyResult<String> {
    let depth = RawJson::nesting_depth(&text);
    if depth > RawJson::MAX_DEPTH {
        return Err(coded(
            ErrorCode::MalformedScenario,
            format!("the scenario nests {depth} deep, over the limit of {}", RawJson::MAX_DEPTH),
        ));
    }
    let planned = py.detach(|| {
        stepjournal::scenario::Scenario::parse(&text).map(|scenario| scenario.plan().to_json())
    });
    planned.map_err(thrown)
}

impl NativeJournal {
    fn handles(&self) -> (Journal, Tools) {
        (self.journal.clone(), self.tools.clone())
    }
}

/// A session id as stored (for reads: an id the writer would refuse reads nothing).
fn stored(session: &str) -> SessionId {
    SessionId::from_stored(session)
}

#[pymethods]
impl NativeJournal {
    /// Begins a run of `session` through the entry (FORMAT.md's entry JSON): an awaitable of the
    /// run.
    fn begin_run<'py>(
        &self,
        py: Python<'py>,
        session: String,
        entry: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let entry = convert::entry(&entry)?;
        let session = convert::session(&session)?;
        let (journal, tools) = self.handles();
        crate::bridge::awaitable(py, async move {
            let run = journal.begin_run_async(&session, entry).await.map_err(thrown)?;
            Ok(NativeRun::new(run, journal, tools))
        })
    }

    /// Stops the session's work; the stop's plan as JSON text.
    fn stop<'py>(&self, py: Python<'py>, session: String) -> PyResult<Bound<'py, PyAny>> {
        let session = convert::session(&session)?;
        let journal = self.journal.clone();
        crate::bridge::awaitable(py, async move {
            let plan = journal.stop_async(&session).await.map_err(thrown)?;
            Ok(plan.to_json())
        })
    }

    /// One retention pass: deletes the sessions whose last run ended more than `age_ms` ago;
    /// `(deleted, changed)`.
    fn retain<'py>(&self, py: Python<'py>, age_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        let age = at_least_one_ms(age_ms, "age")?;
        let journal = self.journal.clone();
        crate::bridge::awaitable(py, async move {
            let done = journal.retain(age).map_err(thrown)?;
            let ids = |ids: Vec<SessionId>| -> Vec<String> {
                ids.iter().map(|s| s.as_str().to_owned()).collect()
            };
            Ok((ids(done.deleted), ids(done.changed)))
        })
    }

    /// Trims the session, keeping its last `keep_turns` turns whole: what was dropped, as JSON
    /// text (`Trim::to_json`).
    fn trim<'py>(
        &self,
        py: Python<'py>,
        session: String,
        keep_turns: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let session = convert::session(&session)?;
        let journal = self.journal.clone();
        crate::bridge::awaitable(py, async move {
            let done = journal.trim_async(&session, keep_turns).await.map_err(thrown)?;
            Ok(done.to_json().to_string())
        })
    }

    /// The sessions a start-up recovers.
    fn sessions_to_recover<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let journal = self.journal.clone();
        crate::bridge::awaitable(py, async move {
            let sessions = journal.sessions_to_recover().map_err(thrown)?;
            Ok(sessions.iter().map(|s| s.as_str().to_owned()).collect::<Vec<_>>())
        })
    }

    /// Writes the client's answer (JSON text) to client call `call` of the session's saved
    /// step; the run it was written through, whose step is open.
    fn answer_client<'py>(
        &self,
        py: Python<'py>,
        session: String,
        call: String,
        output: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let output = RawJson::parse(&output)
            .map_err(|e| coded(ErrorCode::InvalidAnswer, format!("the answer is not JSON: {e}")))?;
        let session = convert::session(&session)?;
        let call = CallId::from(call.as_str());
        let (journal, tools) = self.handles();
        crate::bridge::awaitable(py, async move {
            let run = journal.answer_client(&session, &call, output).await.map_err(thrown)?;
            Ok(NativeRun::new(run, journal, tools))
        })
    }

    /// Records the decision on approval-gated call `call`; the run it was written through.
    fn decide_approval<'py>(
        &self,
        py: Python<'py>,
        session: String,
        call: String,
        approved: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let session = convert::session(&session)?;
        let call = CallId::from(call.as_str());
        let (journal, tools) = self.handles();
        crate::bridge::awaitable(py, async move {
            let run = journal.decide_approval(&session, &call, approved).await.map_err(thrown)?;
            Ok(NativeRun::new(run, journal, tools))
        })
    }

    /// Forks `session` at `checkpoint` (a step commit's) into `new_session`: the new session's
    /// events as written, as export lines.
    fn fork<'py>(
        &self,
        py: Python<'py>,
        session: String,
        checkpoint: String,
        new_session: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let session = stored(&session);
        let checkpoint = CheckpointId::from(checkpoint.as_str());
        let new_session = convert::session(&new_session)?;
        let journal = self.journal.clone();
        crate::bridge::awaitable(py, async move {
            let written =
                journal.fork_async(&session, &checkpoint, &new_session).await.map_err(thrown)?;
            Ok(written.iter().map(record_to_export_line).collect::<Vec<_>>())
        })
    }

    /// What the model is shown for the session now, as a JSON array's text.
    fn transcript<'py>(&self, py: Python<'py>, session: String) -> PyResult<Bound<'py, PyAny>> {
        let session = stored(&session);
        let journal = self.journal.clone();
        crate::bridge::awaitable(py, async move {
            let items = journal.transcript_async(&session).await.map_err(thrown)?;
            Ok(convert::items(&items))
        })
    }

    /// The session's steps as JSON text: `[{step, checkpoint, committed, commit_checkpoint}]`.
    fn steps<'py>(&self, py: Python<'py>, session: String) -> PyResult<Bound<'py, PyAny>> {
        let session = stored(&session);
        let journal = self.journal.clone();
        crate::bridge::awaitable(py, async move {
            let state = journal.state(&session).map_err(thrown)?;
            let steps: Vec<serde_json::Value> = state
                .replies()
                .iter()
                .map(|r| {
                    let commit = state.commits().iter().find(|c| c.step == r.step);
                    json!({
                        "step": r.step.get(),
                        "checkpoint": r.checkpoint.as_str(),
                        "committed": commit.is_some(),
                        "commit_checkpoint": commit.map(|c| c.checkpoint.as_str()),
                    })
                })
                .collect();
            Ok(serde_json::Value::Array(steps).to_string())
        })
    }

    /// The session's log as `stepjournal export` writes it: one line per record.
    fn export_lines<'py>(&self, py: Python<'py>, session: String) -> PyResult<Bound<'py, PyAny>> {
        let session = stored(&session);
        let journal = self.journal.clone();
        crate::bridge::awaitable(py, async move {
            let records = journal.store().read_all(&session).map_err(thrown)?;
            Ok(records.iter().map(record_to_export_line).collect::<Vec<_>>())
        })
    }

    /// Recovers every session to recover (see [`crate::recover::recover_all`]), `concurrency`
    /// at once, each recovered run handed to `on_recovered`; the report as JSON text.
    fn recover_all<'py>(
        &self,
        py: Python<'py>,
        concurrency: usize,
        on_recovered: Py<PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (journal, tools) = self.handles();
        crate::recover::recover_all(py, journal, tools, concurrency, on_recovered)
    }

    /// FORMAT.md's `tools` object for these tools, as JSON text.
    fn tools_json(&self) -> String {
        self.tools.to_tools_json().to_string()
    }

    /// Who owns the runs this journal begins (the `owner` option, or the default).
    #[getter]
    fn owner(&self) -> String {
        self.journal.owner().to_string()
    }

    /// The store's and the writer's counters, as JSON text.
    fn metrics(&self) -> String {
        let m = self.journal.metrics();
        json!({
            "appends": m.store.appends,
            "groups": m.store.groups,
            "max_group": m.store.max_group,
            "syncs": m.store.syncs,
            "bytes": m.store.bytes,
            "runs_begun": m.runs_begun,
            "fenced_writes_refused": m.fenced_writes_refused,
        })
        .to_string()
    }

    /// Closes the journal: new runs are refused; open runs get `deadline_ms` to end; then the
    /// store is closed and the journal's claim on it let go. The sessions left for recovery.
    fn close<'py>(&self, py: Python<'py>, deadline_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        let deadline = Duration::from_millis(deadline_ms);
        let journal = self.journal.clone();
        crate::bridge::awaitable(py, async move {
            let done = journal.close(deadline).await.map_err(thrown)?;
            Ok(done.abandoned.iter().map(|s| s.as_str().to_owned()).collect::<Vec<_>>())
        })
    }
}
