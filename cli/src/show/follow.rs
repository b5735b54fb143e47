//! `stepjournal show --follow`: the session's tail read again every interval, and what
//! landed printed as it lands (the timeline's new or changed lines, or each new export line).

use std::io::Write;

use stepjournal_codec::json::record_to_export_line;
use stepjournal_codec::{Event, Record, SessionId};

use super::ShowArgs;
use super::timeline::{Screen, timeline_lines, write_wrapped};
use crate::CliError;
use crate::reading::Reading;

/// Whether the session's last run has ended.
fn ended(records: &[Record]) -> bool {
    let mut last = None;
    for r in records {
        match &r.event {
            Event::RunStarted(_) => last = Some(false),
            Event::RunEnded(_) => last = Some(true),
            _ => {}
        }
    }
    last == Some(true)
}

/// Reads the session again every interval and prints the timeline's lines that changed or are
/// new (a line changes when a later event folds into it: an output chunk, a `rewound`).
pub(crate) fn follow(
    args: &ShowArgs,
    reading: &mut Reading,
    session: &SessionId,
    mut records: Vec<Record>,
    mut lines: Vec<String>,
    screen: Screen,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let Screen { style, width, seq_w } = screen;
    // The columns stay as the first screen set them (`seq_w`).
    while !(args.until_ended && ended(&records)) {
        std::thread::sleep(std::time::Duration::from_millis(args.interval));
        reading.refresh()?;
        let Some(now) = reading.read(session)? else { continue };
        if now.len() <= records.len() {
            continue;
        }
        records = now;
        let fresh = timeline_lines(&records, style, seq_w);
        let same = lines.iter().zip(&fresh).take_while(|(a, b)| a == b).count();
        for l in fresh.iter().skip(same) {
            write_wrapped(l, width, seq_w, out)?;
        }
        out.flush()?;
        lines = fresh;
    }
    Ok(())
}

/// `--follow --json`: each new event's export line as it lands.
pub(crate) fn follow_json(
    args: &ShowArgs,
    reading: &mut Reading,
    session: &SessionId,
    mut seen: u64,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if !args.follow {
        return Ok(());
    }
    let mut records = reading.read_one(session)?;
    while !(args.until_ended && ended(&records)) {
        std::thread::sleep(std::time::Duration::from_millis(args.interval));
        reading.refresh()?;
        let Some(now) = reading.read(session)? else { continue };
        for r in now.iter().skip(seen as usize) {
            writeln!(out, "{}", record_to_export_line(r))?;
        }
        out.flush()?;
        seen = seen.max(now.len() as u64);
        records = now;
    }
    Ok(())
}
