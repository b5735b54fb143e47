//! `stepjournal export`: sessions as JSON lines: a header line, then one line per event, ordered
//! by session then seq, each FORMAT.md's event form plus `session`, `seq` and `at`.

use std::io::Write;

use clap::Args;
use stepjournal_codec::SessionId;
use stepjournal_codec::json::record_to_export_line;

use super::CliError;
use super::progress::Progress;
use super::reading::{OnDamage, Reading};
use super::shown::StoreName;

/// The first line of every export.
pub const HEADER: &str = r#"{"format":"stepjournal-export","version":1}"#;

/// Arguments of `stepjournal export`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  stepjournal export file:./stepjournal-demo > journal.jsonl\n  \
stepjournal export sqlite:journal.db s-1 s-2 > two.jsonl\n\n\
The first line is {\"format\":\"stepjournal-export\",\"version\":1}; then one line per event, \
ordered by session then seq: the event's JSON form (FORMAT.md) plus \"session\", \"seq\" and \
\"at\" (unix milliseconds). `stepjournal import FILE --to STORE` reads it back; exporting again \
gives the same bytes, whatever the backends in between."
)]
pub struct ExportArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// Only these sessions (default: every session).
    #[arg(value_name = "SESSION")]
    pub sessions: Vec<String>,
    /// On damage: stop (`fail`), or export every intact session and list the damaged ones
    /// on standard error, exiting 1 (`skip`).
    #[arg(long, value_enum, default_value_t = OnDamage::Fail, value_name = "MODE")]
    pub on_corruption: OnDamage,
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exported {
    /// Sessions written.
    pub sessions: u64,
    /// Events written.
    pub events: u64,
}

/// Writes the export of `sessions` (every session when empty) of `store` to `out`. A named
/// session that is not in the store is an error before anything is written.
pub fn export(
    reading: &mut Reading,
    sessions: &[SessionId],
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Exported, CliError> {
    let url = reading.url().to_owned();
    let url = url.as_str();
    let store = std::sync::Arc::clone(&reading.store);
    let mut sessions = if sessions.is_empty() {
        reading.sessions()?
    } else {
        let mut named = sessions.to_vec();
        named.sort();
        named.dedup();
        for s in &named {
            let tail = store.tail(s).map_err(|source| CliError::Store {
                url: StoreName::of(url),
                doing: format!("reading the tail of {s}"),
                source,
            })?;
            if tail.get() == 0 {
                return Err(CliError::NoSession { url: StoreName::of(url), session: s.clone() });
            }
        }
        named
    };
    sessions.sort();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    writeln!(out, "{HEADER}")?;
    let mut done = Exported::default();
    let total = sessions.len() as u64;
    for (i, s) in sessions.iter().enumerate() {
        progress(i as u64, total);
        let read = reading.read(s).map_err(|source| match done.sessions {
            0 => source,
            sessions => {
                CliError::ExportStopped { sessions, events: done.events, source: Box::new(source) }
            }
        });
        let Some(records) = read? else { continue };
        for r in &records {
            out.write_all(record_to_export_line(r).as_bytes())?;
            out.write_all(b"\n")?;
        }
        done.sessions += u64::from(!records.is_empty());
        done.events += records.len() as u64;
    }
    out.flush()?;
    Ok(done)
}

/// Runs `stepjournal export`.
pub fn run(args: &ExportArgs, out: &mut dyn Write, progress: bool) -> Result<(), CliError> {
    let mut reading = Reading::open(&args.store, args.on_corruption)?;
    let sessions: Vec<SessionId> =
        args.sessions.iter().map(|s| SessionId::from_stored(s.as_str())).collect();
    let mut bar = Progress::new(progress, "export (sessions)", false);
    let done = export(&mut reading, &sessions, out, &mut |d, t| bar.update(d, t));
    bar.finish();
    done?;
    reading.finish()
}
