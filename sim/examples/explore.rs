//! The exhaustive explorer: every execution of the writer (and of `drive`) in a small scope.
//!
//! ```text
//! cargo run --release -p stepjournal-sim --example explore -- --scope deep
//! cargo run --release -p stepjournal-sim --example explore -- --scope three
//! cargo run -p stepjournal-sim --example explore -- --scope ci
//! cargo run -p stepjournal-sim --example explore -- --variant 'step/mb2/free/tool:u>s' --choices 'a4.lands>wake'
//! cargo run -p stepjournal-sim --features plant --example explore -- --scope ci --plant unsafe-rerun
//! cargo run --release -p stepjournal-sim --example explore -- --scope actors-deep --progress
//! cargo run -p stepjournal-sim --example explore -- --actors 'crashed-unsafe/r1+r2/skew+0/t1'
//! cargo run -p stepjournal-sim --example explore -- --actors 'crashed-unsafe/r1+r2/skew+0/t1' --interleaving 'r1:recover r1:go'
//! ```
//!
//! The actor scopes (`actors-ci`, `actors-deep`) search several actors at once; `--actors V`
//! searches one actor variant, and with `--interleaving M` replays one interleaving of it.
//!
//! `--scope` searches a scope and prints what it covers, its counts and the failing executions
//! (fewest faults first), each with the command that replays it; `--variant` with `--choices`
//! replays one execution and prints its trace and what it broke; `--variant` alone searches that
//! variant with up to 2 faults. `--plant NAME` plants a bug
//! and stops at the first failing execution with the fewest faults; `--progress` prints the
//! counts after each variant on standard error. Exits 1 when something was
//! found, 2 on a usage error.

use std::process::ExitCode;

use stepjournal_sim::explore::actors::{self, ActorScope, ActorVariant};
use stepjournal_sim::explore::{self, Choices, Job, Menu, Options, Plant, Scope, Variant};

const USAGE: &str = "usage: explore [--scope ci|deep|three|actors-ci|actors-deep] \
                     [--variant V [--choices C]] [--actors V [--interleaving M]] [--plant NAME] \
                     [--keep N] [--progress]";

struct Args {
    scope: Option<Scope>,
    actor_scope: Option<ActorScope>,
    actors: Option<ActorVariant>,
    interleaving: Option<String>,
    variant: Option<Variant>,
    choices: Option<Choices>,
    plant: Option<Plant>,
    keep: usize,
    progress: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        scope: None,
        actor_scope: None,
        actors: None,
        interleaving: None,
        variant: None,
        choices: None,
        plant: None,
        keep: 10,
        progress: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--scope" => {
                let name = value()?;
                match ActorScope::named(&name) {
                    Some(scope) => args.actor_scope = Some(scope),
                    None => args.scope = Some(name.parse()?),
                }
            }
            "--actors" => args.actors = Some(value()?.parse().map_err(|e| format!("{e}"))?),
            "--interleaving" => args.interleaving = Some(value()?),
            "--variant" => args.variant = Some(value()?.parse().map_err(|e| format!("{e}"))?),
            "--choices" => args.choices = Some(value()?.parse().map_err(|e| format!("{e}"))?),
            "--plant" => args.plant = Some(value()?.parse()?),
            "--progress" => args.progress = true,
            "--keep" => {
                args.keep = value()?.parse().map_err(|_| "--keep needs a number".to_owned())?
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("explore: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let options = Options {
        plant: args.plant,
        first_only: args.plant.is_some(),
        keep: args.keep,
        progress: args.progress,
    };
    if let Some(variant) = &args.actors {
        return match &args.interleaving {
            Some(moves) => replay_actors(variant, moves, args.plant),
            None => {
                search_actors(&format!("actors {variant}"), std::slice::from_ref(variant), options)
            }
        };
    }
    if let Some(scope) = args.actor_scope {
        println!("{}", scope.describe());
        let name = match scope {
            ActorScope::Ci => "scope actors-ci",
            ActorScope::Deep => "scope actors-deep",
        };
        return search_actors(name, &scope.variants(), options);
    }
    if let (Some(variant), Some(choices)) = (&args.variant, &args.choices) {
        return match explore::replay(variant, choices, args.plant) {
            Ok(finding) => {
                let heading = format!("variant {} choices {}", finding.variant, finding.choices);
                print_replay(&heading, &finding.trace, &finding.violations)
            }
            Err(e) => {
                eprintln!("explore: {e}");
                ExitCode::from(2)
            }
        };
    }
    let (name, jobs) = match &args.variant {
        Some(variant) => {
            let job = Job { variant: variant.clone(), menus: vec![Menu::FULL, Menu::FULL] };
            (format!("variant {variant}"), vec![job])
        }
        None => {
            let scope = args.scope.unwrap_or(Scope::Ci);
            println!("{}", scope.describe());
            (format!("scope {scope}"), scope.jobs())
        }
    };
    match explore::explore(&jobs, options) {
        Ok(summary) => {
            println!("{name}: {}", summary.counts_line());
            print!("{}", summary.findings_text());
            if summary.findings.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Err(e) => {
            eprintln!("explore: {e}");
            ExitCode::from(2)
        }
    }
}

fn search_actors(name: &str, variants: &[ActorVariant], options: Options) -> ExitCode {
    match actors::explore_actors(variants, options) {
        Ok(summary) => {
            println!("{name}: {}", summary.counts_line());
            print!("{}", summary.findings_text());
            if summary.findings.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Err(e) => {
            eprintln!("explore: {e}");
            ExitCode::from(2)
        }
    }
}

fn replay_actors(variant: &ActorVariant, moves: &str, plant: Option<Plant>) -> ExitCode {
    let interleaving = match actors::Interleaving::parse(moves, variant) {
        Ok(interleaving) => interleaving,
        Err(e) => {
            eprintln!("explore: {e}");
            return ExitCode::from(2);
        }
    };
    match actors::replay_actors(variant, &interleaving, plant) {
        Ok(finding) => {
            let heading = format!("variant {variant} moves {}", interleaving.text(variant));
            print_replay(&heading, &finding.trace, &finding.violations)
        }
        Err(e) => {
            eprintln!("explore: {e}");
            ExitCode::from(2)
        }
    }
}

/// Prints a replayed execution (its heading, trace and violations); exits 1 if it broke a rule.
fn print_replay(
    heading: &str,
    trace: &[String],
    violations: &[impl std::fmt::Display],
) -> ExitCode {
    println!("{heading}");
    for line in trace {
        println!("  trace: {line}");
    }
    for v in violations {
        println!("  violation: {v}");
    }
    if violations.is_empty() {
        println!("no violation");
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
