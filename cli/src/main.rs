//! The `stepjournal` command: parse the arguments, run the subcommand, map the result to an exit
//! status. Everything else is in the library (`stepjournal_cli`).

use std::process::ExitCode;

use clap::Parser;
use stepjournal_cli::{Cli, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    match run(cli, &mut out, &mut err) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Standard error is gone too when this fails: nothing is left to tell.
            let _ = e.write_report(&mut err);
            ExitCode::from(e.exit_code())
        }
    }
}
