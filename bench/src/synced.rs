//! The synced append rows, one group per event size and thread count: the raw loop from as many
//! threads (each on a file of its own), the ideal cohort and okaywal (256-byte events), plain
//! SQLite `FULL`, and stepjournal on file, SQLite and PostgreSQL. A group's contenders run in
//! turn, in slices of about 100 ms, round after round, so that a disk whose speed drifts weighs
//! on each of them alike (a shared virtual disk's does: this project's runs in bursts of fast
//! syncs between stretches throttled to a few hundred per second).

use stepjournal_backends::Durability;

use crate::appends::{Measured, SIZES};
use crate::args::WorkDir;
use crate::table::{Compare, Section, Table};
use crate::turns::in_turns;

/// The thread counts (one session per thread) of the append rows.
pub const THREADS: [usize; 3] = [1, 8, 64];

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    for bytes in SIZES {
        for threads in THREADS {
            group(work, table, bytes, threads)?;
        }
    }
    Ok(())
}

/// The workload name every backend's row of a group shares.
pub fn workload(bytes: usize, threads: usize) -> String {
    let plural = if threads == 1 { "" } else { "s" };
    format!("Synced, {bytes} B events, {threads} session{plural}")
}

/// The event size of the ideal cohort and okaywal rows.
const PEER_BYTES: usize = 256;

fn group(work: &WorkDir, table: &mut Table, bytes: usize, threads: usize) -> Result<(), String> {
    let dir = work.sub(&format!("synced-{bytes}-{threads}"))?;
    let peers = bytes == PEER_BYTES;
    let mut contenders = vec![crate::raw::contender(&dir, bytes, threads)?];
    if peers && threads > 1 {
        contenders.push(crate::raw_shared::contender(&dir, bytes, threads)?);
    }
    if peers {
        contenders.push(crate::cohort::contender(&dir, bytes, threads)?);
    }
    {
        use crate::plain::{Sharing, Sync, contender};
        contenders.push(contender(&dir, bytes, threads, Sync::Full, Sharing::Shared)?);
        // Alone, and not in --quick: its threads sleep in the busy handler for seconds.
        if threads > 1 && !work.quick {
            let per_thread = contender(&dir, bytes, threads, Sync::Full, Sharing::PerThread)?;
            contenders.push(per_thread.alone());
        }
    }
    if peers {
        contenders.push(crate::wal::contender(&dir, bytes, threads)?);
    }
    contenders.push(crate::file::contender(&dir, bytes, threads, 1, Durability::Synced)?);
    if peers {
        contenders.push(crate::async_file::contender(&dir, bytes, threads)?);
    }
    contenders.push(crate::sqlite::contender(&dir, bytes, threads, Durability::Synced)?);
    {
        use crate::postgres::{Via, contender};
        for via in [Via::Direct, Via::Pooled, Via::Standby] {
            if let Some(pg) = contender(via, bytes, threads, Durability::Synced)? {
                contenders.push(pg);
            }
        }
    }
    let raw_key = crate::raw::fsync_key(bytes, threads);
    let cohort_key = crate::cohort::key(bytes, threads);
    for mut t in in_turns(work, contenders)? {
        let raw_row = t.group == "raw";
        if t.workload.is_empty() {
            t.workload = workload(bytes, threads);
        }
        let mut row = if raw_row {
            t.row(Section::Raw, Measured::events_per_sec, "records/s")
        } else {
            t.row(Section::Synced, Measured::appends_per_sec, "appends/s")
        }
        .vs_sqlite(Compare::to(crate::plain::full_key(bytes, threads)));
        if row.key != raw_key {
            row = row.vs_raw(Compare::to(raw_key.clone()));
        }
        if row.key == crate::raw_shared::key(bytes, threads) {
            // One sync at a time on one file: the 1-session group's loop (another group's
            // turns, so the ratio carries the disk's drift between them).
            row = row.vs("1 thread", Compare::to(crate::raw::fsync_key(bytes, 1)));
        }
        if peers && !raw_row {
            row = row.vs("ideal cohort", Compare::to(cohort_key.clone()));
        }
        if row.group == "file async" {
            let sync = format!("file.{}.{bytes}.{threads}", Durability::Synced.as_str());
            row = row.vs("file sync", Compare::to(sync));
        }
        if row.group == "postgres pooled" || row.group == "postgres standby" {
            let direct = crate::postgres::Via::Direct.key(Durability::Synced, bytes, threads);
            row = row.vs("postgres direct", Compare::to(direct));
        }
        if row.group == "file" {
            if peers {
                row = row.vs("okaywal", Compare::to(crate::wal::key(bytes, threads)));
            }
            let sqlite = crate::sqlite::key(bytes, threads, Durability::Synced);
            row = row.vs("sqlite backend", Compare::to(sqlite));
        }
        table.push(row);
    }
    work.clear(&dir);
    Ok(())
}
