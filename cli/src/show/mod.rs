//! `stepjournal show`: one session's timeline, event by event: runs, steps, calls (tool, kind,
//! policy), attempts, output (consecutive chunks folded), results, pairings and what voided them.

mod follow;
mod timeline;

use std::io::Write;

use clap::Args;
use stepjournal_codec::SessionId;
use stepjournal_codec::json::record_to_export_line;

pub use timeline::{Style, render, render_held};

use super::reading::{OnDamage, Reading};
use super::sessions::Holders;
use super::{CliError, Terminal};
use timeline::{Screen, seq_width};

/// Arguments of `stepjournal show`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal show file:./stepjournal-demo SESSION\n  \
stepjournal show sqlite:journal.db SESSION --json > session.jsonl\n\n\
Each line is one event: its seq, its append time (UTC) and what it says, indented under its run \
and step. Consecutive output chunks of one attempt are folded into one line. Colour is used, \
and long lines are wrapped to the width, only when standard output is a terminal (and NO_COLOR \
is not set for colour).\n\n\
--follow reads the session's tail every --interval milliseconds and prints what landed; on a \
file journal each read opens the journal again (read-only, as a reader beside a runtime does).")]
pub struct ShowArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// The session.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// Print the session's export lines (JSON, one event per line) instead.
    #[arg(long)]
    pub json: bool,
    /// Keep reading the session's tail and print each event as it lands.
    #[arg(long)]
    pub follow: bool,
    /// With --follow: how often the tail is read, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 500, requires = "follow")]
    pub interval: u64,
    /// With --follow: stop once the session's last run has ended (else follow until
    /// interrupted).
    #[arg(long, requires = "follow")]
    pub until_ended: bool,
    /// On damage: stop (`fail`), or say that the session is damaged and exit 1 (`skip`).
    #[arg(long, value_enum, default_value_t = OnDamage::Fail, value_name = "MODE")]
    pub on_corruption: OnDamage,
}

/// Runs `stepjournal show`.
pub fn run(args: &ShowArgs, out: &mut dyn Write, term: Terminal) -> Result<(), CliError> {
    let mut reading = Reading::open(&args.store, args.on_corruption)?;
    let session = SessionId::from_stored(args.session.as_str());
    let records = reading.read_one(&session)?;
    let mut out = std::io::BufWriter::new(out);
    if args.json {
        for r in &records {
            writeln!(out, "{}", record_to_export_line(r))?;
        }
        out.flush()?;
        return follow::follow_json(args, &mut reading, &session, records.len() as u64, &mut out);
    }
    let style = if term.colour { Style::COLOUR } else { Style::PLAIN };
    let holders = Holders::of_one(&reading, &session)?;
    let state = crate::store::fold_records(&records);
    let held = holders.held(&session, &state);
    let lines = render_held(&records, held, style, term.width, &mut out)?;
    out.flush()?;
    if args.follow {
        let screen = Screen { style, width: term.width, seq_w: seq_width(records.len()) };
        follow::follow(args, &mut reading, &session, records, lines, screen, &mut out)?;
    }
    Ok(())
}
