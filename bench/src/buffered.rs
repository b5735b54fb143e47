//! The `Buffered` rows, one group per session count and batch size of 256-byte events, compared
//! only with what is not durable either: the `write` loop without sync from as many threads with
//! as many records per write, and plain SQLite `synchronous=NORMAL` with as many events per
//! transaction; beside them the file backend and, at one event per append, the SQLite and
//! PostgreSQL backends. All in turns, like the synced groups.

use stepjournal_backends::Durability;

use crate::appends::Measured;
use crate::args::WorkDir;
use crate::file::buffered_row;
use crate::plain::{Sharing, Sync};
use crate::table::{Compare, Section, Table};
use crate::turns::in_turns;

/// (sessions, events per append).
const GROUPS: [(usize, usize); 6] = [(1, 1), (8, 1), (1, 16), (8, 16), (1, 256), (8, 256)];

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    for (sessions, batch) in GROUPS {
        group(work, table, sessions, batch)?;
    }
    Ok(())
}

fn group(work: &WorkDir, table: &mut Table, sessions: usize, batch: usize) -> Result<(), String> {
    let dir = work.sub(&format!("buffered-{sessions}-{batch}"))?;
    let mut contenders = vec![
        crate::raw::unsynced_contender(&dir, sessions, batch)?,
        crate::plain::contender_batched(&dir, 256, sessions, batch, Sync::Normal, Sharing::Shared)?,
        crate::file::contender(&dir, 256, sessions, batch, Durability::Buffered)?,
    ];
    if batch == 1 {
        contenders.push(crate::sqlite::contender(&dir, 256, sessions, Durability::Buffered)?);
        if let Some(pg) = crate::postgres::contender(
            crate::postgres::Via::Direct,
            256,
            sessions,
            Durability::Buffered,
        )? {
            contenders.push(pg);
        }
    }
    let raw_key = crate::raw::unsynced_key(sessions, batch);
    let sql_key = crate::plain::normal_key(256, sessions, batch);
    for t in in_turns(work, contenders)? {
        let row = match t.group {
            "raw" => t
                .row(Section::Raw, Measured::events_per_sec, "records/s")
                .vs_sqlite(Compare::to(sql_key.clone())),
            "plain sqlite" => {
                let note = format!("{}; latency per transaction", t.note);
                t.row(Section::Buffered, Measured::events_per_sec, "events/s")
                    .vs_raw(Compare::to(raw_key.clone()))
                    .note(note)
            }
            group => {
                let key = t.key.clone();
                buffered_row(group, key, &t.measured, sessions, batch, t.syncs, &t.note)
            }
        };
        table.push(row);
    }
    work.clear(&dir);
    Ok(())
}
