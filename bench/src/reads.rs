//! Reading one session whose batches are interleaved 1:3 with three other sessions' (one writer
//! appending to each in turn, so that between two of its batches lie three others), warm and
//! cold: the bytes the process read for it (`rchar`) over the bytes its own batches occupy in
//! the segments (each batch's frame, its header and records; not the group headers around it).

use std::time::Instant;

use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::{Limits, Seq, SessionId, batch};

use crate::appends::event;
use crate::args::WorkDir;
use crate::file::{open, segment_files};
use crate::procio::ReadCounter;
use crate::table::{Row, Section, Table};

/// Sessions the writer appends to in turn; the first is the one read.
const SESSIONS: usize = 4;
/// Events of 256 bytes per batch.
const EVENTS: usize = 4;

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("reads-interleaved")?;
    let target = work.interleaved_bytes();
    let names: Vec<SessionId> =
        (0..SESSIONS).map(|k| SessionId::new(format!("read-{k:03}").as_str()).unwrap()).collect();
    let events = vec![event(256); EVENTS];
    let limits = Limits::default();
    // The bytes the read session's batches occupy, encoded the way the store encodes them.
    let mut own = 0u64;
    let mut batches = 0u64;
    {
        let store = open(&dir)?;
        let mut tails = [Seq(0); SESSIONS];
        let mut frame = Vec::new();
        for i in 0usize.. {
            if store.stats().bytes >= target {
                break;
            }
            let k = i % SESSIONS;
            let (Some(s), Some(tail)) = (names.get(k), tails.get_mut(k)) else { break };
            if k == 0 {
                frame.clear();
                own += batch::encode_into(&mut frame, s, *tail, &events, &limits)
                    .map_err(|e| e.to_string())? as u64;
                batches += 1;
            }
            *tail = store
                .append(s, *tail, &events, Durability::Buffered)
                .map_err(|e| format!("appending to {s}: {e}"))?
                .next;
        }
    }
    let files = segment_files(&dir)?;
    let cold_ok = crate::cache::available(&dir);
    let read = names.first().ok_or("no session to read")?;
    for cold in [false, true] {
        if cold && !cold_ok {
            continue;
        }
        let cache = if cold { "cold" } else { "warm" };
        let store = open(&dir)?;
        if cold {
            crate::cache::evict(&files)?;
        }
        let counter = ReadCounter::start();
        let start = Instant::now();
        let records = store.read_all(read).map_err(|e| format!("reading {read}: {e}"))?;
        let secs = start.elapsed().as_secs_f64();
        let bytes_read = counter.and_then(|c| c.bytes());
        drop(store);
        if records.len() as u64 != batches * EVENTS as u64 {
            return Err(format!(
                "reading {read} returned {} events, not the {} written",
                records.len(),
                batches * EVENTS as u64
            ));
        }
        let reads = match bytes_read {
            Some(n) => {
                format!("read {:.2} MB for its batches' {:.2} MB", n as f64 / 1e6, own as f64 / 1e6)
            }
            None => "bytes read not known (/proc/self/io cannot be read)".to_owned(),
        };
        let mut row = Row::new(
            Section::Reads,
            format!("file.read.interleaved.{cache}"),
            "file",
            format!(
                "read one session interleaved 1:3 with 3 others, {EVENTS} x 256 B events per \
                 batch, {cache} cache"
            ),
            own as f64 / 1e9 / secs,
            "GB/s",
            secs,
        )
        .mb(own as f64 / 1e6 / secs)
        .note(format!(
            "{reads}; {batches} batches; bytes read/byte: over the bytes its batches occupy \
             (frames with their headers); {}",
            crate::cache::describe(cold)
        ));
        if let Some(n) = bytes_read {
            row = row.read_per_byte(n as f64 / own.max(1) as f64);
        }
        table.push(row);
    }
    work.clear(&dir);
    Ok(())
}
