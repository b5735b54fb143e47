//! `--count OP N`: exactly `N` operations inside one function that does nothing else, so that
//! `valgrind --tool=callgrind --toggle-collect='*count::counted_*'` counts the instructions of
//! those `N` operations alone (what is made ready for them, untimed, lies outside the
//! function), and the count divided by `N` is the instructions per operation. Callgrind counts
//! user-space instructions: a system call's time in the kernel is not in them.
//!
//! - `encode`: `record::encode_into` of one 256-byte message record into a cleared buffer;
//! - `decode`: `RecordRef::parse` (checksum checked) and `event()` of one such record;
//! - `fold`: `recovery::fold_owned` of an `N`-event protocol-shaped session, its state dropped;
//! - `append`: `JournalStore::append` of one 256-byte event, `Buffered`, to a file journal.

use std::hint::black_box;

use stepjournal::recovery::fold_owned;
use stepjournal_backends::file::FileStore;
use stepjournal_backends::{Durability, JournalStore};
use stepjournal_codec::record::{self, RecordRef};
use stepjournal_codec::{Event, Limits, Seq, SessionId, Stamped};

use crate::appends::{event, session};
use crate::args::WorkDir;

/// Distinct records the decode cycles through.
const DISTINCT: usize = 1000;

pub fn run(op: &str, n: u64, work: &WorkDir) -> Result<(), String> {
    let s = session(0, 0);
    let one = event(256);
    let limits = Limits::default();
    let done = match op {
        "encode" => {
            let mut buf = Vec::with_capacity(512);
            counted_encode(n, &mut buf, &s, &one, &limits)?
        }
        "decode" => {
            let mut records = Vec::with_capacity(DISTINCT * 256);
            let mut starts = Vec::with_capacity(DISTINCT);
            for i in 0..DISTINCT {
                starts.push(records.len());
                record::encode_into(&mut records, &s, Seq(i as u64), one.at, &one.event, &limits)
                    .map_err(|e| format!("encoding: {e}"))?;
            }
            counted_decode(n, &records, &starts, &limits)?
        }
        "fold" => {
            let mut log = crate::fold::long_log(n as usize);
            log.truncate(n as usize);
            counted_fold(log)
        }
        "append" => {
            let dir = work.sub("count-append")?;
            let store = crate::file::open(&dir)?;
            let events = [one];
            let appended = counted_append(n, &store, &s, &events);
            drop(store);
            work.clear(&dir);
            appended?
        }
        other => return Err(format!("--count: unknown operation `{other}`")),
    };
    println!(
        "{done} {op} operations in stepjournal_bench::count::counted_{op}: divide its \
         instructions (callgrind's Ir, collected with --toggle-collect='*count::counted_*') by {done}"
    );
    Ok(())
}

#[inline(never)]
fn counted_encode(
    n: u64,
    buf: &mut Vec<u8>,
    s: &SessionId,
    one: &Stamped,
    limits: &Limits,
) -> Result<u64, String> {
    for i in 0..n {
        buf.clear();
        record::encode_into(buf, s, Seq(i), one.at, &one.event, limits)
            .map_err(|e| format!("encoding: {e}"))?;
        black_box(&buf);
    }
    Ok(n)
}

#[inline(never)]
fn counted_decode(
    n: u64,
    records: &[u8],
    starts: &[usize],
    limits: &Limits,
) -> Result<u64, String> {
    for i in 0..n {
        let at = starts.get(i as usize % starts.len().max(1)).copied().unwrap_or(0);
        let bytes = records.get(at..).unwrap_or_default();
        let (r, _) = RecordRef::parse(bytes, limits).map_err(|e| format!("decoding: {e}"))?;
        black_box(r.event().map_err(|e| format!("decoding: {e}"))?);
    }
    Ok(n)
}

#[inline(never)]
fn counted_fold(log: Vec<Event>) -> u64 {
    let n = log.len() as u64;
    drop(black_box(fold_owned(log)));
    n
}

#[inline(never)]
fn counted_append(
    n: u64,
    store: &FileStore,
    s: &SessionId,
    events: &[Stamped],
) -> Result<u64, String> {
    let mut tail = Seq(0);
    for _ in 0..n {
        tail = store
            .append(s, tail, events, Durability::Buffered)
            .map_err(|e| format!("appending to {s} at {tail}: {e}"))?
            .next;
    }
    Ok(n)
}
