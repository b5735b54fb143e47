//! `NativeJournal::recover_all`: the library's start-up recovery, its report as JSON text and
//! each recovered run handed to JavaScript as it finishes.

use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use serde_json::{Value, json};
use stepjournal::{RecoverOptions, Recovered, Run, StepOutcome};

use crate::convert;
use crate::error::{coded_text, thrown};
use crate::journal::NativeJournal;
use crate::run::NativeRun;

/// Called with `[run, outcomeJson | null]` for each recovered session as its step is driven;
/// the Promise it returns is awaited before the session counts as recovered (the package's
/// wrapper settles it, catching what the runtime's `onRecovered` throws).
pub type RecoveredFn = ThreadsafeFunction<
    (NativeRun, Option<String>),
    Promise<()>,
    (NativeRun, Option<String>),
    napi::Status,
    false,
    true,
>;

#[napi]
impl NativeJournal {
    /// Recovers every session to recover as [`stepjournal::Journal::recover_all`] does (a wake
    /// at the tail each was listed at, never forcing a lease), `concurrency` at once, each
    /// recovered run handed to `on_recovered`. The report as JSON text: `{recovered: [session],
    /// skipped: [{session, owner, run, expiresAtMs}], changed: [session], waiting: [{session,
    /// calls}], failed: [{session, error}]}`, each `error` as the native module throws it
    /// (`SJ:<code>:<message>`).
    #[napi]
    pub async fn recover_all(
        &self,
        concurrency: Option<u32>,
        on_recovered: RecoveredFn,
    ) -> napi::Result<String> {
        let mut options = RecoverOptions::new();
        if let Some(n) = concurrency {
            options = options.concurrency(usize::try_from(n).unwrap_or(usize::MAX));
        }
        let hand = |run: Run, outcome: Option<StepOutcome>| {
            let run = self.native_run(run);
            let outcome = outcome.as_ref().map(convert::step_outcome);
            let on_recovered = &on_recovered;
            async move {
                // The wrapper's Promise never rejects; a failure to call it or to settle it
                // means the event loop went away, and there is nobody left to hand the run to.
                if let Ok(settled) = on_recovered.call_async((run, outcome)).await {
                    let _ = settled.await;
                }
            }
        };
        let report = self.journal.recover_all(&self.tools, options, hand).await.map_err(thrown)?;
        Ok(report_json(&report).to_string())
    }
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
            "expiresAtMs": lease.expires.get(),
        })).collect::<Vec<_>>(),
        "changed": sessions(&report.changed),
        "waiting": report.waiting.iter().map(|(session, calls)| json!({
            "session": session.as_str(),
            "calls": calls.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "failed": report.failed.iter().map(|(session, why)| json!({
            "session": session.as_str(),
            "error": coded_text(why),
        })).collect::<Vec<_>>(),
    })
}
