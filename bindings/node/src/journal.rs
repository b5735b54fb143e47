//! `NativeJournal`: a journal over a store URL, with the JavaScript tools.

use std::sync::Arc;
use std::time::Duration;

use napi_derive::napi;
use serde_json::json;
use stepjournal::backends::{Durability, OpenOptions, OwnerId, open_url};
use stepjournal::codec::json::record_to_export_line;
use stepjournal::codec::{CallId, CheckpointId, Operator, RawJson, SessionId};
use stepjournal::recovery::Config;
use stepjournal::{Journal, JournalOptions, Tools};

use crate::convert;
use crate::error::{coded, thrown};
use crate::run::NativeRun;
use crate::tools::{AbortFn, ToolDef, tools};
use stepjournal::ErrorCode;

/// How a journal is opened.
#[napi(object)]
#[derive(Debug)]
pub struct JournalConfig {
    /// `synced` (the default) or `buffered`.
    pub durability: Option<String>,
    /// How many bodies one call may start in all (default 3).
    pub max_bodies: Option<u32>,
    /// Create the store when it does not exist (default true).
    pub create: Option<bool>,
    /// How long a run's lease lasts unless renewed, in milliseconds (default 30,000; at least 1):
    /// a crashed process's runs on SQLite or PostgreSQL are recoverable elsewhere that long after
    /// it died.
    pub lease_ttl_ms: Option<u32>,
    /// Who owns the runs this journal begins, the holder of their leases (default
    /// `host:pid:random`); give each process its own.
    pub owner: Option<String>,
    /// How many committed steps lie between two `snapshot`s a run writes (default 32; 0 writes
    /// none by policy).
    pub snapshot_every: Option<u32>,
    /// How many bytes of text after the last snapshot make the next step commit carry one
    /// (default 1 MiB; 0 weighs no bytes). A whole number up to 2^53.
    pub snapshot_after_bytes: Option<f64>,
    /// Retention: sessions whose last run ended (completed, failed, stopped) more than this many
    /// milliseconds ago are deleted by a thread of the journal's (default: kept). A whole
    /// number, at least 1.
    pub retain_ended_for_ms: Option<f64>,
    /// Trim policy: after a run ends (completed or stopped) with a snapshot in its view, its
    /// session is trimmed keeping this many last turns whole (default: never trimmed).
    pub trim_keep_turns: Option<u32>,
    /// Who begins this journal's runs, and why: recorded on each entry's `run_started` (a stop's
    /// `run_ended`).
    pub operator: Option<OperatorConfig>,
}

/// Who acts through a journal, and why.
#[napi(object)]
#[derive(Debug)]
pub struct OperatorConfig {
    /// Who (1 to 200 bytes, no control characters).
    pub name: Option<String>,
    /// Why (1 to 2000 bytes, no control characters).
    pub reason: Option<String>,
}

/// What a retention pass did.
#[napi(object)]
#[derive(Debug)]
pub struct RetainedJs {
    /// The sessions deleted.
    pub deleted: Vec<String>,
    /// The sessions judged old whose log changed before their delete: kept.
    pub changed: Vec<String>,
}

/// `ms` as a duration, when it is a whole number of milliseconds, at least 1, that JavaScript
/// holds exactly.
fn whole_ms(ms: f64, what: &str) -> napi::Result<Duration> {
    if ms.fract() == 0.0 && (1.0..=9_007_199_254_740_992.0).contains(&ms) {
        Ok(Duration::from_millis(ms as u64))
    } else {
        Err(coded(
            ErrorCode::InvalidOptions,
            format!("{what} must be a whole number of milliseconds, at least 1"),
        ))
    }
}

/// A journal: the session writer over one store, with the tools it drives with.
#[napi]
#[derive(Debug)]
pub struct NativeJournal {
    pub(crate) journal: Journal,
    pub(crate) tools: Tools,
}

/// Opens the store `url` names (`file:PATH`, `sqlite:PATH`, `postgres://...`) for writing and
/// a journal over it with `defs` as its tools.
#[napi]
pub async fn open(
    url: String,
    defs: Vec<ToolDef>,
    abort: AbortFn,
    config: JournalConfig,
) -> napi::Result<NativeJournal> {
    let tools = tools(defs, abort)?;
    let mut options = JournalOptions::new();
    match config.durability.as_deref() {
        None | Some("synced") => options = options.durability(Durability::Synced),
        Some("buffered") => options = options.durability(Durability::Buffered),
        Some(other) => {
            return Err(coded(
                ErrorCode::InvalidOptions,
                format!("durability `{other}` is neither `synced` nor `buffered`"),
            ));
        }
    }
    if let Some(max) = config.max_bodies {
        let recovery = Config::new(max).map_err(|e| coded(ErrorCode::InvalidOptions, e))?;
        options = options.recovery(recovery);
    }
    if let Some(ms) = config.lease_ttl_ms {
        if ms == 0 {
            return Err(coded(ErrorCode::InvalidOptions, "leaseTtlMs must be at least 1"));
        }
        options = options.lease_ttl(Duration::from_millis(u64::from(ms)));
    }
    if let Some(owner) = config.owner {
        if owner.trim().is_empty() {
            return Err(coded(ErrorCode::InvalidOptions, "owner must be a non-empty string"));
        }
        options = options.owner(OwnerId::new(owner));
    }
    if let Some(steps) = config.snapshot_every {
        options = options.snapshot_every(steps);
    }
    if let Some(bytes) = config.snapshot_after_bytes {
        // A whole, non-negative number JavaScript holds exactly (checked in the JS layer too).
        if !(bytes.fract() == 0.0 && (0.0..=9_007_199_254_740_992.0).contains(&bytes)) {
            return Err(coded(
                ErrorCode::InvalidOptions,
                "snapshotAfterBytes must be a whole number of bytes, 0 or more",
            ));
        }
        options = options.snapshot_after_bytes(bytes as u64);
    }
    if let Some(ms) = config.retain_ended_for_ms {
        options = options.retain_ended_for(whole_ms(ms, "retainEndedForMs")?);
    }
    if let Some(keep) = config.trim_keep_turns {
        options = options.trim_after_runs(usize::try_from(keep).unwrap_or(usize::MAX));
    }
    if let Some(who) = config.operator {
        let operator =
            Operator::new(who.name, who.reason).map_err(|e| coded(ErrorCode::InvalidId, e))?;
        options = options.operator(operator);
    }
    let open_options =
        if config.create.unwrap_or(true) { OpenOptions::create() } else { OpenOptions::default() };
    let store = open_url(&url, open_options).map_err(thrown)?;
    let journal = Journal::new(store, Arc::new(tools.clone()), options).map_err(thrown)?;
    Ok(NativeJournal { journal, tools })
}

/// Plans a conformance scenario (FORMAT.md) as `stepjournal plan --scenario` does: the plan as
/// one JSON object's text.
#[napi]
pub fn plan_scenario(text: String) -> napi::Result<String> {
    let depth = RawJson::nesting_depth(&text);
    if depth > RawJson::MAX_DEPTH {
        return Err(coded(
            ErrorCode::MalformedScenario,
            format!("the scenario nests {depth} deep, over the limit of {}", RawJson::MAX_DEPTH),
        ));
    }
    let scenario = stepjournal::scenario::Scenario::parse(&text).map_err(thrown)?;
    Ok(scenario.plan().to_json())
}

impl NativeJournal {
    /// `run` as JavaScript holds it.
    pub(crate) fn native_run(&self, run: stepjournal::Run) -> NativeRun {
        NativeRun::new(run, self.journal.clone(), self.tools.clone())
    }
}

#[napi]
impl NativeJournal {
    /// Begins a run of `session` through the entry (FORMAT.md's entry JSON).
    #[napi]
    pub async fn begin_run(&self, session: String, entry: String) -> napi::Result<NativeRun> {
        let entry = convert::entry(&entry)?;
        let session = convert::session(&session)?;
        let run = self.journal.begin_run_async(&session, entry).await.map_err(thrown)?;
        Ok(self.native_run(run))
    }

    /// Stops the session's work; the stop's plan as JSON text.
    #[napi]
    pub async fn stop(&self, session: String) -> napi::Result<String> {
        let session = convert::session(&session)?;
        let plan = self.journal.stop_async(&session).await.map_err(thrown)?;
        Ok(plan.to_json())
    }

    /// One retention pass: deletes the sessions whose last run ended more than `age_ms` ago.
    #[napi]
    pub async fn retain(&self, age_ms: f64) -> napi::Result<RetainedJs> {
        let done = self.journal.retain(whole_ms(age_ms, "ageMs")?).map_err(thrown)?;
        let ids = |ids: Vec<SessionId>| ids.iter().map(|s| s.as_str().to_owned()).collect();
        Ok(RetainedJs { deleted: ids(done.deleted), changed: ids(done.changed) })
    }

    /// Trims the session, keeping its last `keep_turns` turns whole: what was dropped, as
    /// `{trimmed, before, from, at, turns}` or `{trimmed: false, why}`, as JSON text.
    #[napi]
    pub async fn trim(&self, session: String, keep_turns: u32) -> napi::Result<String> {
        let session = convert::session(&session)?;
        let keep = usize::try_from(keep_turns).unwrap_or(usize::MAX);
        let done = self.journal.trim_async(&session, keep).await.map_err(thrown)?;
        Ok(done.to_json().to_string())
    }

    /// The sessions a start-up recovers.
    #[napi]
    pub async fn sessions_to_recover(&self) -> napi::Result<Vec<String>> {
        let sessions = self.journal.sessions_to_recover().map_err(thrown)?;
        Ok(sessions.iter().map(|s| s.as_str().to_owned()).collect())
    }

    /// Writes the client's answer (JSON text) to client call `call` of the session's saved
    /// step; the run it was written through, whose step is open.
    #[napi]
    pub async fn answer_client(
        &self,
        session: String,
        call: String,
        output: String,
    ) -> napi::Result<NativeRun> {
        let output = RawJson::parse(&output)
            .map_err(|e| coded(ErrorCode::InvalidAnswer, format!("the answer is not JSON: {e}")))?;
        let session = convert::session(&session)?;
        let call = CallId::from(call.as_str());
        let run = self.journal.answer_client(&session, &call, output).await.map_err(thrown)?;
        Ok(self.native_run(run))
    }

    /// Records the decision on approval-gated call `call`; the run it was written through.
    #[napi]
    pub async fn decide_approval(
        &self,
        session: String,
        call: String,
        approved: bool,
    ) -> napi::Result<NativeRun> {
        let session = convert::session(&session)?;
        let call = CallId::from(call.as_str());
        let run = self.journal.decide_approval(&session, &call, approved).await.map_err(thrown)?;
        Ok(self.native_run(run))
    }

    /// Forks `session` at `checkpoint` (a step commit's) into `new_session`: the new session's
    /// events as written, as export lines (`forked_from`, then the `snapshot`).
    #[napi]
    pub async fn fork(
        &self,
        session: String,
        checkpoint: String,
        new_session: String,
    ) -> napi::Result<Vec<String>> {
        let session = SessionId::from_stored(session.as_str());
        let checkpoint = CheckpointId::from(checkpoint.as_str());
        let new_session = convert::session(&new_session)?;
        let written =
            self.journal.fork_async(&session, &checkpoint, &new_session).await.map_err(thrown)?;
        Ok(written.iter().map(record_to_export_line).collect())
    }

    /// What the model is shown for the session now, as a JSON array's text.
    #[napi]
    pub async fn transcript(&self, session: String) -> napi::Result<String> {
        let session = SessionId::from_stored(session.as_str());
        let items = self.journal.transcript_async(&session).await.map_err(thrown)?;
        Ok(convert::items(&items))
    }

    /// The session's steps as JSON text: `[{step, checkpoint, committed, commitCheckpoint}]`,
    /// each step's append checkpoint (what `resume` `from_checkpoint` and `retry` take) and, once
    /// committed, its commit checkpoint.
    #[napi]
    pub async fn steps(&self, session: String) -> napi::Result<String> {
        let session = SessionId::from_stored(session.as_str());
        let state = self.journal.state(&session).map_err(thrown)?;
        let steps: Vec<serde_json::Value> = state
            .replies()
            .iter()
            .map(|r| {
                let commit = state.commits().iter().find(|c| c.step == r.step);
                json!({
                    "step": r.step.get(),
                    "checkpoint": r.checkpoint.as_str(),
                    "committed": commit.is_some(),
                    "commitCheckpoint": commit.map(|c| c.checkpoint.as_str()),
                })
            })
            .collect();
        Ok(serde_json::Value::Array(steps).to_string())
    }

    /// The session's log as `stepjournal export` writes it: one line per record.
    #[napi]
    pub async fn export_lines(&self, session: String) -> napi::Result<Vec<String>> {
        let session = SessionId::from_stored(session.as_str());
        let records = self.journal.store().read_all(&session).map_err(thrown)?;
        Ok(records.iter().map(record_to_export_line).collect())
    }

    /// FORMAT.md's `tools` object for these tools, as JSON text.
    #[napi]
    pub fn tools_json(&self) -> String {
        self.tools.to_tools_json().to_string()
    }

    /// Who owns the runs this journal begins (the `owner` option, or the default).
    #[napi(getter)]
    pub fn owner(&self) -> String {
        self.journal.owner().to_string()
    }

    /// The store's and the writer's counters, as JSON text.
    #[napi]
    pub fn metrics(&self) -> String {
        let m = self.journal.metrics();
        json!({
            "appends": m.store.appends,
            "groups": m.store.groups,
            "maxGroup": m.store.max_group,
            "syncs": m.store.syncs,
            "bytes": m.store.bytes,
            "runsBegun": m.runs_begun,
            "fencedWritesRefused": m.fenced_writes_refused,
        })
        .to_string()
    }

    /// Closes the journal: new runs are refused; open runs get `deadline_ms` to end; then the
    /// store is closed (the file store's lock released, its threads stopped) and the journal's
    /// claim on it let go, so the store can be opened again at once.
    #[napi]
    pub async fn close(&self, deadline_ms: u32) -> napi::Result<Vec<String>> {
        let deadline = Duration::from_millis(u64::from(deadline_ms));
        let done = self.journal.close(deadline).await.map_err(thrown)?;
        Ok(done.abandoned.iter().map(|s| s.as_str().to_owned()).collect())
    }
}
