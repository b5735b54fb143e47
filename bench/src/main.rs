//! The side-by-side benchmark: one table, every row measured in the same run and directory.
//!
//! `cargo run --release -p stepjournal-bench -- [--quick] [--dir DIR] [--json FILE]`
//!
//! Each workload group is a module that adds its rows to the [`table::Table`]; the raw rows come
//! first, as the physical limits every other row is compared with.

mod appends;
mod args;
mod file;
mod postgres;
mod raw;
mod sqlite;
mod table;
mod writer;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = match args::Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("stepjournal-bench: {e}\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stepjournal-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &args::Args) -> Result<(), String> {
    let work = args::WorkDir::new(args)?;
    let mut table = table::Table::new(work.path(), args.quick);
    raw::rows(&work, &mut table)?;
    file::rows(&work, &mut table)?;
    sqlite::rows(&work, &mut table)?;
    postgres::rows(&work, &mut table)?;
    writer::rows(&work, &mut table)?;
    print!("{}", table.render());
    if let Some(path) = &args.json {
        table.write_json(path)?;
    }
    Ok(())
}
