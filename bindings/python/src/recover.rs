//! `recover_all`: the library's start-up recovery, its report as JSON text and
//! each recovered run handed to Python as it finishes.

use pyo3::prelude::*;
use serde_json::{Value, json};
use stepjournal::{Journal, RecoverOptions, Recovered, Run, StepOutcome, Tools};

use crate::bridge::Caller;
use crate::convert;
use crate::error::{parts, thrown};
use crate::run::NativeRun;

/// `NativeJournal.recover_all`: recovers every session to recover as
/// [`stepjournal::Journal::recover_all`] does (a wake at the tail each was listed at, never
/// forcing a lease), `concurrency` at once, each recovered run handed to `on_recovered(run,
/// outcome_json)` (a coroutine function that never raises: the package's wrapper keeps what the
/// runtime's callback raises), awaited on the caller's event loop before the session counts as
/// recovered. The report as JSON text: `{recovered: [session], skipped: [{session, owner, run,
/// expires_at_ms}], changed: [session], waiting: [{session, calls}], failed: [{session, code,
/// refusal, message}]}`.
pub(crate) fn recover_all<'py>(
    py: Python<'py>,
    journal: Journal,
    tools: Tools,
    concurrency: usize,
    on_recovered: Py<PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    crate::bridge::awaitable(py, async move {
        let options = RecoverOptions::new().concurrency(concurrency.max(1));
        let on_recovered = std::sync::Arc::new(on_recovered);
        let on_recovered = &on_recovered;
        let hand = |run: Run, outcome: Option<StepOutcome>| {
            let run = NativeRun::new(run, journal.clone(), tools.clone());
            let outcome = outcome.as_ref().map(convert::step_outcome);
            async move {
                // The wrapper's coroutine never raises; one that cannot be started or ends
                // without a result means its loop went away, and there is nobody left to hand the
                // run to (the package reports the session as not handed over).
                if let Some(caller) = Caller::current() {
                    drop(
                        caller
                            .start(on_recovered.clone(), move |py| (run, outcome).into_pyobject(py))
                            .await,
                    );
                }
            }
        };
        let report = journal.recover_all(&tools, options, hand).await.map_err(thrown)?;
        Ok(report_json(&report).to_string())
    })
}

/// The report as the package reads it.
fn report_json(report: &Recovered) -> Value {
    let sessions = |list: &[stepjournal::codec::SessionId]| -> Vec<Value> {
        list.iter().map(|s| json!(s.as_str())).collect()
    };
    json!({
        "recovered": sessions(&report.recovered),
        "skipped": report.skipped.iter().map(|(session, lease)| json!({
            "session": session.as_str(),
            "owner": lease.owner.as_str(),
            "run": lease.run.as_str(),
            "expires_at_ms": lease.expires.get(),
        })).collect::<Vec<_>>(),
        "changed": sessions(&report.changed),
        "waiting": report.waiting.iter().map(|(session, calls)| json!({
            "session": session.as_str(),
            "calls": calls.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "failed": report.failed.iter().map(|(session, why)| {
            let (code, refusal, message) = parts(why);
            json!({ "session": session.as_str(), "code": code, "refusal": refusal, "message": message })
        }).collect::<Vec<_>>(),
    })
}
