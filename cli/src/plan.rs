//! `stepjournal plan`: what recovery would do for an entry, as one JSON object: for a
//! conformance scenario (`--scenario FILE`), or for a session of a store (a dry run that writes
//! nothing), then with a readable explanation too.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args};
use stepjournal_codec::json::event_to_json;
use stepjournal_codec::{
    CheckpointId, Entry, Event, RawJson, Replay, ResumeMode, RunId, SessionId, ToolName,
};
use stepjournal_recovery::{
    Action, ArgsCheck, Config, NewRun, Plan, SessionState, ToolRegistry, plan,
};

use super::CliError;
use super::reading::{OnDamage, Reading};
use super::shown::{Shown, StoreName};
use stepjournal::registry::SchemaRegistry;
use stepjournal::scenario::Scenario;

/// Arguments of `stepjournal plan`.
#[derive(Debug, Args)]
#[command(
    group(ArgGroup::new("source").required(true).args(["scenario", "store"])),
    after_help = "Examples:\n  stepjournal plan --scenario tests/conformance/cases/01-safe-tool-runs-again.json\n  \
stepjournal plan file:./stepjournal-demo SESSION --entry wake\n  \
stepjournal plan sqlite:journal.db SESSION --entry '{\"kind\":\"retry\"}' --tools tools.json --json\n\n\
The plan is one JSON line: {\"error\":null,\"step\":1,\"calls\":[...],\"appends\":[...]}.\n\
Each call carries the `rule` that decided it and `why`. A refused entry (validation_error) is\n\
still a plan and exits 0; an unreadable or malformed input exits 2 with the problem on stderr.\n\n\
On a store, the plan is a dry run: the store is opened read-only and nothing is written. Without\n\
--json it is explained: each call with its tool, its action and the rule that decided it, then\n\
each event the entry would append; --json prints the JSON line alone. ENTRY is FORMAT.md's entry JSON\n\
or one of the words wake, resume (continue), retry, stop. FILE is FORMAT.md's `tools` object\n\
(tool name to {\"replay\": \"safe\"|\"unsafe\", \"input_schema\": {...}}); without it, each tool\n\
is taken as present with its call's saved policy and no schema. The run and checkpoint ids in\n\
the appends are placeholders: the writer mints its own."
)]
pub struct PlanArgs {
    /// A recovery conformance scenario (FORMAT.md): its log, tools, max_bodies and entry. Its
    /// `expect` member is never read.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["store", "entry", "tools", "json"])]
    pub scenario: Option<PathBuf>,
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE", requires_all = ["session", "entry"])]
    pub store: Option<String>,
    /// The session to plan.
    #[arg(value_name = "SESSION", requires = "store")]
    pub session: Option<String>,
    /// The entry: FORMAT.md's entry JSON, or wake, resume, retry, stop.
    #[arg(long, value_name = "ENTRY", requires = "store")]
    pub entry: Option<String>,
    /// The tool registry as it is now: FORMAT.md's `tools` object.
    #[arg(long, value_name = "FILE", requires = "store")]
    pub tools: Option<PathBuf>,
    /// How many bodies one call may start in all.
    #[arg(long, value_name = "N", default_value_t = Config::DEFAULT_MAX_BODIES)]
    pub max_bodies: u32,
    /// Print the plan as one JSON line instead of the explanation.
    #[arg(long)]
    pub json: bool,
    /// On damage: stop (`fail`), or say that the session is damaged and exit 1 (`skip`).
    #[arg(long, value_enum, default_value_t = OnDamage::Fail, value_name = "MODE")]
    pub on_corruption: OnDamage,
}

/// Runs `stepjournal plan`.
pub fn run(args: &PlanArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
    match (&args.scenario, &args.store, &args.session, &args.entry) {
        (Some(path), ..) => run_scenario(path, out, err),
        (None, Some(store), Some(session), Some(entry)) => {
            let entry = parse_entry(entry)?;
            let config = Config::new(args.max_bodies)
                .map_err(|e| CliError::Usage { option: "--max-bodies", reason: e.to_string() })?;
            let request = StorePlan {
                url: store,
                session: &SessionId::from_stored(session.as_str()),
                entry,
                tools: args.tools.as_deref(),
                config,
                on_corruption: args.on_corruption,
            };
            run_store(&request, args.json, out, err)
        }
        _ => Err(CliError::Usage {
            option: "plan",
            reason: "give --scenario FILE, or STORE SESSION --entry ENTRY".to_owned(),
        }),
    }
}

/// Plans the scenario and prints the plan as one JSON object on `out`; a tool whose input schema
/// does not compile is reported on `err` (its calls' arguments fail).
fn run_scenario(path: &Path, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| CliError::Read { path: path.to_path_buf(), source })?;
    check_depth(path, &text)?;
    let scenario = Scenario::parse(&text)
        .map_err(|source| CliError::Scenario { path: path.to_path_buf(), source })?;
    report_compile_errors(&scenario.registry, path, err)?;
    let plan = scenario.plan();
    writeln!(out, "{}", plan.to_json())?;
    Ok(())
}

/// Refuses a JSON file nested deeper than [`RawJson::MAX_DEPTH`], saying how deep, before any
/// parser meets it.
fn check_depth(path: &Path, text: &str) -> Result<(), CliError> {
    let depth = RawJson::nesting_depth(text);
    if depth > RawJson::MAX_DEPTH {
        return Err(CliError::TooDeep {
            path: path.to_path_buf(),
            depth,
            limit: RawJson::MAX_DEPTH,
        });
    }
    Ok(())
}

fn report_compile_errors(
    registry: &SchemaRegistry,
    path: &Path,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    for (tool, error) in registry.compile_errors() {
        writeln!(
            err,
            "warning: {}: tool `{}`'s input_schema does not compile, so its arguments fail: {}",
            Shown(path.display()),
            Shown(tool),
            Shown(error)
        )?;
    }
    Ok(())
}

/// Reads `--entry`: FORMAT.md's entry JSON, or a bare word (`wake`; `resume` or `continue` for
/// resume/continue; `retry`; `stop`).
pub fn parse_entry(text: &str) -> Result<Entry, CliError> {
    let text = text.trim();
    let bad = |reason: String| CliError::Usage { option: "--entry", reason };
    if text.starts_with('{') {
        return serde_json::from_str(text)
            .map_err(|e| bad(format!("`{text}` is not FORMAT.md's entry JSON: {e}")));
    }
    match text {
        "wake" => Ok(Entry::Wake),
        "resume" | "continue" => Ok(Entry::Resume(ResumeMode::Continue)),
        "retry" => Ok(Entry::Retry { checkpoint: None, message: None }),
        "stop" => Ok(Entry::Stop),
        _ => Err(bad(format!(
            "`{text}` is not an entry: give wake, resume, retry or stop, or FORMAT.md's entry \
             JSON such as {{\"kind\":\"resume\",\"mode\":\"with_message\",\"message\":\"...\"}}"
        ))),
    }
}

/// Each tool of the saved step present, with its calls' saved policy and no schema: a call's
/// saved policy and the current one must both be safe to run again, so a tool any of whose
/// calls was saved safe is taken as safe now, and each call is decided by its own saved policy.
#[derive(Debug, Default)]
pub(crate) struct SavedPolicies {
    tools: HashMap<ToolName, Replay>,
}

impl SavedPolicies {
    pub(crate) fn of(state: &SessionState) -> Self {
        let mut tools = HashMap::new();
        for call in state.saved_step().map(|r| r.calls()).unwrap_or_default() {
            let policy = tools.entry(call.tool.clone()).or_insert(Replay::Unsafe);
            if call.replay == Replay::Safe {
                *policy = Replay::Safe;
            }
        }
        SavedPolicies { tools }
    }
}

impl ToolRegistry for SavedPolicies {
    fn policy(&self, tool: &ToolName) -> Option<Replay> {
        Some(self.tools.get(tool).copied().unwrap_or(Replay::Unsafe))
    }

    fn check_args(&self, _tool: &ToolName, _args: &RawJson) -> ArgsCheck {
        ArgsCheck::Pass
    }
}

/// What `entry` would do to the folded session of `len` events, each tool taken with its
/// calls' saved policy (see [`plan_store`] without `--tools`). Writes nothing.
pub(crate) fn dry_plan(state: &SessionState, len: u64, entry: Entry, config: &Config) -> Plan {
    let new_run = NewRun {
        run: RunId::new(format!("run-{}", state.runs().len().saturating_add(1))),
        entry,
        commit_checkpoint: CheckpointId::new(format!("cp-commit-{len}")),
    };
    plan(state, &new_run, &SavedPolicies::of(state), config)
}

/// A dry run of recovery on a stored session.
#[derive(Debug)]
pub struct StorePlan<'a> {
    /// The store's URL.
    pub url: &'a str,
    /// The session.
    pub session: &'a SessionId,
    /// The entry.
    pub entry: Entry,
    /// The registry file, if any.
    pub tools: Option<&'a Path>,
    /// Recovery's settings.
    pub config: Config,
    /// What a damaged store does.
    pub on_corruption: OnDamage,
}

const SAVED_POLICIES_NOTE: &str = "no --tools given: each tool is taken as present, with its \
     call's saved policy and no input schema (give --tools FILE for the registry as it is now)";

/// The plan for a stored session, with the state it was folded from. The store is opened
/// read-only and never written.
pub fn plan_store(
    request: &StorePlan<'_>,
    err: &mut dyn Write,
) -> Result<(Plan, SessionState), CliError> {
    let registry = match request.tools {
        Some(path) => Some(read_tools(path, err)?),
        None => None,
    };
    let mut reading = Reading::open(request.url, request.on_corruption)?;
    let records = reading.read_one(request.session)?;
    let state = crate::store::fold_strict(request.url, request.session, &records)?;
    let len = state.len();
    let new_run = NewRun {
        run: RunId::new(format!("run-{}", state.runs().len().saturating_add(1))),
        entry: request.entry.clone(),
        commit_checkpoint: CheckpointId::new(format!("cp-commit-{len}")),
    };
    let plan = match &registry {
        Some(registry) => plan(&state, &new_run, registry, &request.config),
        None => plan(&state, &new_run, &SavedPolicies::of(&state), &request.config),
    };
    Ok((plan, state))
}

fn read_tools(path: &Path, err: &mut dyn Write) -> Result<SchemaRegistry, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| CliError::Read { path: path.to_path_buf(), source })?;
    check_depth(path, &text)?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| CliError::Tools {
        path: path.to_path_buf(),
        reason: format!("not valid JSON: {e}"),
        source: None,
    })?;
    // A scenario file's `tools` member is accepted as well as the bare object.
    let tools = value.get("tools").filter(|_| value.get("log").is_some()).unwrap_or(&value);
    let registry = SchemaRegistry::from_tools_json(tools).map_err(|source| CliError::Tools {
        path: path.to_path_buf(),
        reason: source.to_string(),
        source: Some(source),
    })?;
    report_compile_errors(&registry, path, err)?;
    Ok(registry)
}

fn run_store(
    request: &StorePlan<'_>,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let (plan, state) = plan_store(request, err)?;
    if json {
        if request.tools.is_none() {
            writeln!(err, "note: {SAVED_POLICIES_NOTE}")?;
        }
        writeln!(out, "{}", plan.to_json())?;
    } else {
        explain(request, &plan, &state, out)?;
    }
    Ok(())
}

/// Writes the plan as an operator reads it: the saved step, each call's action and the rule
/// that decided it, and what the entry would append.
pub fn explain(
    request: &StorePlan<'_>,
    plan: &Plan,
    state: &SessionState,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let entry = serde_json::to_string(&request.entry).unwrap_or_default();
    writeln!(
        out,
        "plan for session {} of {}, entry {} (a dry run: nothing is written)",
        Shown(request.session),
        StoreName::of(request.url),
        Shown(entry)
    )?;
    match request.tools {
        Some(path) => writeln!(out, "tools: {}", Shown(path.display()))?,
        None => writeln!(out, "tools: {SAVED_POLICIES_NOTE}")?,
    }
    if let Some(e) = &plan.error {
        return writeln!(out, "refused ({}): {}; nothing would be appended", e.kind(), Shown(e));
    }
    match state.saved_step() {
        None => {
            writeln!(out, "no saved step: every reply's step is committed; no call is recovered")?
        }
        Some(reply) => writeln!(
            out,
            "saved step {} (reply at seq {}, checkpoint {}): {} call{}",
            reply.step,
            reply.seq,
            Shown(&reply.checkpoint),
            plan.calls.len(),
            if plan.calls.len() == 1 { "" } else { "s" }
        )?,
    }
    for c in &plan.calls {
        let tool = state.call(&c.call).map(|r| r.call().tool.to_string()).unwrap_or_default();
        let action = action_text(&c.action);
        writeln!(out, "  {}  {}: {action}", Shown(&c.call), Shown(&tool))?;
        writeln!(out, "      rule {}: {}", c.rule.id, Shown(&c.rule.why))?;
    }
    let at = state.len();
    writeln!(
        out,
        "the entry would append {} event{} in one batch at seq {at}:",
        plan.appends.len(),
        if plan.appends.len() == 1 { "" } else { "s" }
    )?;
    for (i, e) in plan.appends.iter().enumerate() {
        let text = match e {
            Event::Paired(p) if p.partial.is_empty() => {
                format!("paired {} {}", p.call, p.reason.as_str())
            }
            Event::Paired(p) => format!(
                "paired {} {}, partial output {}",
                p.call,
                p.reason.as_str(),
                serde_json::Value::String(p.partial.clone())
            ),
            other => event_to_json(other),
        };
        // The whole line: ids and the JSON text alike (JSON leaves DEL, C1 and bidirectional
        // controls raw in its strings).
        writeln!(out, "  {}  {}", at + i as u64, Shown(text))?;
    }
    Ok(())
}

/// An action as the plan's explanation (and the timeline page) says it.
pub(crate) fn action_text(action: &Action) -> String {
    match action {
        Action::Keep => "keep (resolved)".to_owned(),
        Action::Run { dispatch, attempt } => format!(
            "run attempt {attempt} (dispatch {})",
            Shown(dispatch.as_ref().map_or("minted before the body starts", |d| d.as_str()))
        ),
        Action::Pair { reason } => format!("pair {}", reason.as_str()),
        Action::Await => "await (the client's answer or the approval settles it)".to_owned(),
        Action::Reattach { child, .. } => {
            format!("reattach to child session {}", Shown(child))
        }
        Action::StartChild { .. } => "start the child under its dispatch id".to_owned(),
        Action::ReenterChild { .. } => "re-enter the companion child".to_owned(),
    }
}
