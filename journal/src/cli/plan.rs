//! `stepjournal plan`: what recovery would do for an entry, as one JSON object.

use std::io::Write;
use std::path::PathBuf;

use clap::{ArgGroup, Args};

use super::CliError;
use crate::scenario::{Scenario, plan_to_json};

/// Arguments of `stepjournal plan`.
#[derive(Debug, Args)]
#[command(
    group(ArgGroup::new("source").required(true).args(["scenario"])),
    after_help = "Example:\n  stepjournal plan --scenario tests/conformance/cases/01-safe-tool-runs-again.json\n\n\
The plan is printed on one line: {\"error\":null,\"step\":1,\"calls\":[...],\"appends\":[...]}.\n\
Each call carries the `rule` that decided it and `why`. A refused entry (validation_error) is\n\
still a plan and exits 0; an unreadable or malformed scenario exits 1 with the problem on stderr."
)]
pub struct PlanArgs {
    /// A recovery conformance scenario (FORMAT.md): its log, tools, max_bodies and entry. Its
    /// `expect` member is never read.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
}

/// Plans the scenario and prints the plan as one JSON object on `out`; a tool whose input schema
/// does not compile is reported on `err` (its calls' arguments fail).
pub fn run(args: &PlanArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
    let Some(path) = &args.scenario else {
        return Ok(());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|source| CliError::Read { path: path.clone(), source })?;
    let scenario = Scenario::parse(&text)
        .map_err(|source| CliError::Scenario { path: path.clone(), source })?;
    for (tool, error) in scenario.registry.compile_errors() {
        writeln!(
            err,
            "warning: {}: tool `{tool}`'s input_schema does not compile, so its arguments fail: {error}",
            path.display()
        )?;
    }
    let plan = scenario.plan();
    writeln!(out, "{}", plan_to_json(&plan))?;
    Ok(())
}
