//! Reading a conformance scenario (FORMAT.md) from arbitrary text and planning it.

use stepjournal::scenario::{Scenario, check, expect_of};
use stepjournal_codec::json;
use stepjournal_recovery::{fold, verify};

use super::{check_plan, ensure};

/// Reads `data` as a scenario: no panic; a scenario that reads re-prints its events as JSON that
/// reads back the same, plans with [`super::check_plan`]'s invariants, and its plan prints as JSON
/// that the scenario checker takes.
pub fn check_scenario_json(data: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(data) else { return Ok(()) };
    let scenario = match Scenario::parse(text) {
        Ok(s) => s,
        Err(e) => {
            ensure!(!e.to_string().is_empty(), "a scenario error with no message");
            return Ok(());
        }
    };
    for (i, event) in scenario.log.iter().enumerate() {
        let printed = json::event_to_json(event);
        let back = json::parse_event(&printed)
            .map_err(|e| format!("log[{i}] printed as {printed} does not read back: {e}"))?;
        ensure!(&back == event, "log[{i}] changed on a JSON round trip: {printed}");
    }
    let state = fold(&scenario.log);
    let _ = verify(&scenario.log);
    let run = scenario.new_run();
    let plan = scenario.plan();
    ensure!(plan == scenario.plan(), "the scenario's plan is not deterministic");
    check_plan(&state, &plan, &run.entry, &scenario.registry, &scenario.config)?;
    let printed = plan.to_json();
    let value: serde_json::Value = serde_json::from_str(&printed)
        .map_err(|e| format!("the plan's JSON does not parse: {e}: {printed}"))?;
    if let Ok(expect) = expect_of(text) {
        let _ = check(&value, &expect);
    }
    Ok(())
}
