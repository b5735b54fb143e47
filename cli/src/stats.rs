//! `stepjournal stats`: sessions, events, bytes, and events of each kind.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use clap::Args;
use serde_json::{Map, Value, json};
use stepjournal_backends::StoreUrl;
use stepjournal_backends::file::SegmentId;
use stepjournal_codec::{EventKind, Limits};

use super::CliError;
use super::reading::{OnDamage, Reading};
use super::shown::StoreName;

/// Arguments of `stepjournal stats`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  stepjournal stats file:./stepjournal-demo\n  \
stepjournal stats sqlite:journal.db --json\n\n\
Bytes are the segment files' sizes on disk for a file journal (with the zeros its writer puts \
ahead of the data, and deleted sessions' frames until their space is reclaimed), and the stored \
records' sizes for other stores; `records` gives the records' sizes for a file journal too.")]
pub struct StatsArgs {
    /// The store: file:PATH, sqlite:PATH or postgres://...
    #[arg(value_name = "STORE")]
    pub store: String,
    /// One JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
    /// On damage: stop (`fail`), or count every intact session and list the damaged ones on
    /// standard error, exiting 1 (`skip`).
    #[arg(long, value_enum, default_value_t = OnDamage::Fail, value_name = "MODE")]
    pub on_corruption: OnDamage,
}

/// What a store holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Sessions with at least one event.
    pub sessions: u64,
    /// Events.
    pub events: u64,
    /// Bytes, as `bytes_of` says: a file journal's segment files on disk, other stores'
    /// records.
    pub bytes: u64,
    /// What `bytes` counts.
    pub bytes_of: &'static str,
    /// Bytes of the events' records (the codec's binary form), on every backend.
    pub record_bytes: u64,
    /// Events of each kind (kinds with none left out).
    pub kinds: BTreeMap<EventKind, u64>,
}

impl Stats {
    /// The stats as one JSON object.
    pub fn to_json(&self, url: &str) -> Value {
        let kinds: Map<String, Value> =
            self.kinds.iter().map(|(k, n)| (k.name().to_owned(), json!(n))).collect();
        json!({
            "store": StoreName::of(url).as_str(),
            "sessions": self.sessions,
            "events": self.events,
            "bytes": self.bytes,
            "bytes_of": self.bytes_of,
            "record_bytes": self.record_bytes,
            "kinds": kinds,
        })
    }
}

fn segment_bytes(dir: &Path) -> Result<u64, CliError> {
    let io = |source| CliError::Read { path: dir.to_path_buf(), source };
    let mut total = 0u64;
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        if name.to_str().and_then(SegmentId::from_file_name).is_none() {
            continue;
        }
        // A segment removed since the listing (a live writer's compaction) counts nothing.
        if let Ok(meta) = entry.metadata() {
            total += meta.len();
        }
    }
    Ok(total)
}

/// Counts what the store `url` names holds.
pub fn collect(reading: &mut Reading) -> Result<Stats, CliError> {
    let url = reading.url().to_owned();
    let url = url.as_str();
    let file_dir = match StoreUrl::parse(url) {
        Ok(StoreUrl::File(dir)) => Some(dir),
        _ => None,
    };
    let limits = Limits::default();
    let mut stats = Stats {
        bytes_of: if file_dir.is_some() {
            "segment files on disk, zeros written ahead of the data included"
        } else {
            "stored records"
        },
        ..Stats::default()
    };
    for s in reading.sessions()? {
        let Some(records) = reading.read(&s)? else { continue };
        stats.sessions += u64::from(!records.is_empty());
        stats.events += records.len() as u64;
        for r in &records {
            *stats.kinds.entry(r.event.kind()).or_default() += 1;
            // The stored record is the codec's, byte for byte.
            let len = stepjournal_codec::record::encode(r, &limits).map_or(0, |b| b.len());
            stats.record_bytes += len as u64;
        }
    }
    stats.bytes = match file_dir {
        Some(dir) => segment_bytes(&dir)?,
        None => stats.record_bytes,
    };
    Ok(stats)
}

/// Writes the stats as lines.
pub fn write_stats(stats: &Stats, url: &str, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "store     {}", StoreName::of(url))?;
    writeln!(out, "sessions  {}", stats.sessions)?;
    writeln!(out, "events    {}", stats.events)?;
    writeln!(out, "bytes     {} ({})", stats.bytes, stats.bytes_of)?;
    if stats.bytes != stats.record_bytes {
        writeln!(out, "records   {} bytes", stats.record_bytes)?;
    }
    if stats.kinds.is_empty() {
        return Ok(());
    }
    writeln!(out, "events by kind:")?;
    let width = stats.kinds.keys().map(|k| k.name().len()).max().unwrap_or(0);
    for (kind, n) in &stats.kinds {
        writeln!(out, "  {:<width$}  {n}", kind.name())?;
    }
    Ok(())
}

/// Runs `stepjournal stats`.
pub fn run(args: &StatsArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let mut reading = Reading::open(&args.store, args.on_corruption)?;
    let stats = collect(&mut reading)?;
    if args.json {
        writeln!(out, "{}", stats.to_json(&args.store))?;
    } else {
        write_stats(&stats, &args.store, out)?;
    }
    reading.finish()
}
