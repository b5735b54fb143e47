//! Long sessions (issue 27): one session grown to 10, 100, 1,000, 10,000 and 100,000 steps (one
//! safe tool call per step with a 4 KiB result, `Durability::Buffered`) on the file backend,
//! with snapshots (the default policy, every 32 steps) and without (`snapshot_every(0)`, up to
//! 10,000 steps). At each length: steps/s while it grew to it, the latency of a wake
//! (`begin_run(Wake)`) on a freshly opened store and the bytes it read, the latency of a
//! `begin_run(NewTurn)`, and the memory one open run of it keeps ([`crate::heap`]). The baseline: a
//! session of 10 steps, woken in the same turns. Then the fold of a 1,000,000-event session from
//! its snapshot ([`crate::long_fold`]) and the executor's timer lateness while long sessions
//! wake ([`crate::long_timer`]).

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use stepjournal::JournalOptions;
use stepjournal_codec::Entry;

use crate::args::WorkDir;
use crate::heap::Window;
use crate::long_session::{Grown, Shelf, rss_kib};
use crate::procio::ReadCounter;
use crate::table::{Compare, Latency, Row, Section, Table, fmt_us};
use crate::turns::order;

/// Steps after the newest snapshot when a long session is woken: a snapshot is written
/// (`Run::snapshot`) this many steps before each length, so every wake folds a suffix of this
/// many steps, as the 10-step baseline session (no snapshot) does.
const SUFFIX: u64 = 10;
/// The two sessions grow in alternating stretches of this many steps.
const STRETCH: u64 = 100;
/// The fewest 10-step sessions grown at each length, one after each stretch of the long ones,
/// as the baseline of steps/s.
const BASES: usize = 10;
/// Runs held open at once to measure the memory of one.
const HELD: usize = 10;

/// One session and the shelf (store directory, snapshot policy) it lives on.
struct Contender {
    /// `base`, `on` or `off`: in the rows' keys.
    tag: &'static str,
    grown: Grown,
    /// Which shelf: 0 with snapshots, 1 without.
    shelf: usize,
    wake: Histogram<u64>,
    turn: Histogram<u64>,
    /// Bytes read by the wakes, and the snapshot-and-suffix bytes there were to read.
    read: Option<u64>,
    expected: u64,
    /// `fdatasync` calls the wakes made.
    syncs: u64,
}

impl Contender {
    fn new(tag: &'static str, grown: Grown, shelf: usize) -> Result<Contender, String> {
        let hist = || Histogram::<u64>::new(3).map_err(|e| e.to_string());
        Ok(Contender {
            tag,
            grown,
            shelf,
            wake: hist()?,
            turn: hist()?,
            read: Some(0),
            expected: 0,
            syncs: 0,
        })
    }

    /// Reopens the store, wakes the session (timed, its reads counted), then begins a new turn
    /// on it (timed); both runs dropped untimed.
    fn wake(&mut self, shelf: &mut Shelf) -> Result<(), String> {
        let s = &self.grown.session;
        self.expected += shelf.snapshot_and_suffix_bytes(s)?;
        shelf.reopen()?;
        let syncs = shelf.syncs();
        let journal = shelf.journal()?;
        let counter = ReadCounter::start();
        let t = Instant::now();
        let woken = journal.begin_run(s, Entry::Wake).map_err(|e| format!("wake of {s}: {e}"))?;
        let wake = t.elapsed();
        let read = counter.and_then(|c| c.bytes());
        self.syncs += shelf.syncs().saturating_sub(syncs);
        let journal = shelf.journal()?;
        let t = Instant::now();
        let turn = journal
            .begin_run(s, Entry::NewTurn { message: "and now?".into() })
            .map_err(|e| format!("new turn of {s}: {e}"))?;
        let turned = t.elapsed();
        drop((woken, turn));
        self.read = self.read.zip(read).map(|(a, b)| a + b);
        record(&mut self.wake, wake)?;
        record(&mut self.turn, turned)
    }
}

fn record(hist: &mut Histogram<u64>, d: Duration) -> Result<(), String> {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
    hist.record(ns).map_err(|e| e.to_string())
}

pub fn rows(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    lengths(work, table)?;
    crate::long_fold::rows(work, table)?;
    crate::long_timer::rows(work, table)
}

/// What every row of a length says about how it was made.
fn how(rounds: usize) -> String {
    format!(
        "file backend, grown with Durability::Buffered (Synced is slow on this disk), one safe \
         call per step with a 4 KiB result; with snapshots: the default policy (every {} steps) \
         and one written {SUFFIX} steps before each length, so a wake folds {SUFFIX} steps after \
         it, as the 10-step baseline session (no snapshot) does; {rounds} turns, the order \
         shuffled every round",
        JournalOptions::DEFAULT_SNAPSHOT_EVERY
    )
}

fn lengths(work: &WorkDir, table: &mut Table) -> Result<(), String> {
    let dir = work.sub("long")?;
    let mut shelves = [
        Shelf::new(&dir.join("snapshots"), JournalOptions::DEFAULT_SNAPSHOT_EVERY)?,
        Shelf::new(&dir.join("no-snapshots"), 0)?,
    ];
    let rounds = work.long_rounds();
    let off_max = work.long_off_max();
    let mut on = Grown::new("long")?;
    let mut off = Grown::new("long")?;
    let mut from = 0;
    for &len in work.long_lengths() {
        let with_off = len <= off_max;
        let mut bases = Vec::with_capacity(BASES);
        while on.steps < len || (with_off && off.steps < len) || bases.len() < BASES {
            if on.steps < len {
                on.grow(shelves[0].journal()?, STRETCH, len, Some(SUFFIX))?;
            }
            if with_off && off.steps < len {
                off.grow(shelves[1].journal()?, STRETCH, len, None)?;
            }
            let mut base = Grown::new(&format!("base-{len}-{}", bases.len()))?;
            base.grow(shelves[0].journal()?, SUFFIX, SUFFIX, None)?;
            base.drop_run();
            bases.push(base);
        }
        on.drop_run();
        off.drop_run();
        let base_secs: Duration = bases.iter_mut().map(Grown::take_time).sum();
        base_row(table, base_secs, bases.len(), len);
        grow_row(table, "on", &mut on, from, len);
        if with_off {
            grow_row(table, "off", &mut off, from, len);
        }
        let base = bases.swap_remove(0);
        let mut contenders = vec![Contender::new("base", base, 0)?];
        contenders.push(Contender::new("on", std::mem::replace(&mut on, Grown::new("long")?), 0)?);
        if with_off {
            let grown = std::mem::replace(&mut off, Grown::new("long")?);
            contenders.push(Contender::new("off", grown, 1)?);
        }
        for round in 0..rounds {
            for j in order(contenders.len(), round) {
                let Some(c) = contenders.get_mut(j) else { continue };
                let Some(shelf) = shelves.get_mut(c.shelf) else { continue };
                c.wake(shelf)?;
            }
        }
        for c in &contenders {
            wake_rows(table, c, len, with_off, rounds);
        }
        for c in contenders.iter().filter(|c| c.tag != "base") {
            let Some(shelf) = shelves.get_mut(c.shelf) else { continue };
            memory_row(table, shelf, c, len, with_off)?;
        }
        for c in contenders {
            match c.tag {
                "on" => on = c.grown,
                "off" => off = c.grown,
                _ => {}
            }
        }
        from = len;
    }
    drop(shelves);
    work.clear(&dir);
    Ok(())
}

fn policy(tag: &str) -> &'static str {
    match tag {
        "off" => "snapshots off",
        "on" => "snapshots on",
        _ => "10-step session",
    }
}

/// The row of steps/s while `grown` grew from `from` steps to `len`.
fn grow_row(table: &mut Table, tag: &'static str, grown: &mut Grown, from: u64, len: u64) {
    let secs = grown.take_time().as_secs_f64().max(f64::MIN_POSITIVE);
    let steps = len - from;
    let mut row = Row::new(
        Section::Long,
        format!("long.grow.{tag}.{len}"),
        "file",
        format!("grow one session from {from} to {len} steps, {}", policy(tag)),
        steps as f64 / secs,
        "steps/s",
        secs,
    )
    .note(format!(
        "{steps} steps in {} (5 events, 4 appends per step; the run's begin untimed), in \
         alternating stretches of {STRETCH} steps with the other policy's session and the \
         10-step sessions; Durability::Buffered; target (snapshots on): steps/s at 10,000 \
         steps >= 0.9x at 10 (the 10-step sessions grown beside it)",
        fmt_us(secs * 1e6)
    ));
    row = row.vs("10-step sessions", Compare::rate_only(format!("long.grow.base.{len}"), 1.0));
    if tag == "on" {
        row = row.vs("snapshots off", Compare::rate_only(format!("long.grow.off.{len}"), 1.0));
    }
    table.push(row);
}

/// The row of steps/s of the `n` sessions grown from 0 to 10 steps beside the long ones.
fn base_row(table: &mut Table, spent: Duration, n: usize, len: u64) {
    let secs = spent.as_secs_f64().max(f64::MIN_POSITIVE);
    let steps = n as u64 * SUFFIX;
    table.push(
        Row::new(
            Section::Long,
            format!("long.grow.base.{len}"),
            "file",
            format!(
                "grow {n} sessions from 0 to {SUFFIX} steps, snapshots on, beside the \
                 sessions grown to {len}"
            ),
            steps as f64 / secs,
            "steps/s",
            secs,
        )
        .note(format!(
            "{steps} steps in {}, one session after each stretch of the long ones (at least \
             {BASES}), each run's begin untimed; Durability::Buffered",
            fmt_us(secs * 1e6)
        )),
    );
}

/// The wake and new-turn rows of one contender at one length.
fn wake_rows(table: &mut Table, c: &Contender, len: u64, with_off: bool, rounds: usize) {
    let steps = if c.tag == "base" { SUFFIX } else { len };
    let n = c.wake.len().max(1) as f64;
    let base_wake = format!("long.wake.base.{len}");
    let base_p50 = table.find(&base_wake).and_then(|r| r.latency).map(|l| l.p50_us);
    for (what, hist, key) in [
        ("wake (begin_run(Wake))", &c.wake, format!("long.wake.{}.{len}", c.tag)),
        ("begin_run(NewTurn)", &c.turn, format!("long.turn.{}.{len}", c.tag)),
    ] {
        let wake = key.starts_with("long.wake");
        let secs = hist.mean() * n / 1e9;
        let mut row = Row::new(
            Section::Long,
            key.clone(),
            "file",
            format!("{what} of a session of {steps} steps, {}", policy(c.tag)),
            n / secs.max(f64::MIN_POSITIVE),
            if wake { "wakes/s" } else { "begins/s" },
            secs,
        )
        .latency(Latency::of(hist));
        let mut note = format!(
            "{}; the store reopened (untimed) before each wake, the new turn begun right after \
             it on the same store; warm page cache",
            how(rounds)
        );
        if wake {
            if let (Some(read), true) = (c.read, c.expected > 0) {
                let per = read as f64 / c.expected as f64;
                row = row.read_per_byte(per);
                note = format!(
                    "read {:.1} KiB per wake (rchar in /proc/self/io), {per:.3}x the record bytes \
                     of the newest snapshot and the suffix after it ({:.1} KiB; the whole log \
                     without one; target <= 1x); {:.1} fdatasync calls per wake (its batch is \
                     the first append since the open: 1 MiB of zeros is written ahead and \
                     synced); {note}",
                    read as f64 / n / 1024.0,
                    c.expected as f64 / n / 1024.0,
                    c.syncs as f64 / n
                );
            }
            if c.tag != "base"
                && let Some(b) = base_p50
            {
                let x = hist.value_at_quantile(0.5) as f64 / 1000.0 / b.max(f64::MIN_POSITIVE);
                note = format!(
                    "p50 {x:.2}x the 10-step session's wake (target at 100,000 steps: <= 2x); \
                     {note}"
                );
            }
        }
        if c.tag != "base" {
            let base = if wake { base_wake.clone() } else { format!("long.turn.base.{len}") };
            row = row.vs("10-step session", Compare::to(base));
        }
        if c.tag == "on" && with_off {
            let off = key.replace(".on.", ".off.");
            row = row.vs("snapshots off", Compare::to(off));
        }
        table.push(row.note(note));
    }
}

/// The memory one open run of `c`'s session keeps: the live heap bytes [`HELD`] runs begun by
/// wakes of it keep (each fences the one before; all are held), after one warm-up wake; with
/// the resident memory's growth beside it.
fn memory_row(
    table: &mut Table,
    shelf: &mut Shelf,
    c: &Contender,
    len: u64,
    with_off: bool,
) -> Result<(), String> {
    let s = &c.grown.session;
    let journal = shelf.journal()?;
    drop(journal.begin_run(s, Entry::Wake).map_err(|e| e.to_string())?);
    let rss_before = rss_kib();
    let window = Window::open();
    let t = Instant::now();
    let mut held = Vec::with_capacity(HELD);
    for _ in 0..HELD {
        held.push(journal.begin_run(s, Entry::Wake).map_err(|e| e.to_string())?);
    }
    let secs = t.elapsed().as_secs_f64();
    let heap = window.bytes();
    drop(window);
    let rss_after = rss_kib();
    drop(held);
    let per = heap.max(0) as f64 / HELD as f64 / 1024.0;
    let rss = match rss_before.zip(rss_after) {
        Some((before, after)) => format!(
            "the resident memory (VmRSS, {} MiB after) grew {:.1} KiB per run (the allocator \
             hands out memory freed before and counts in pages: small figures are noise)",
            after >> 10,
            after.saturating_sub(before) as f64 / HELD as f64
        ),
        None => "no VmRSS in /proc/self/status".to_owned(),
    };
    let mut row = Row::new(
        Section::Long,
        format!("long.memory.{}.{len}", c.tag),
        "file",
        format!("memory of one open run of a session of {len} steps, {}", policy(c.tag)),
        per,
        "KiB/run",
        secs,
    )
    .note(format!(
        "live heap bytes (the bench's counting allocator) kept while {HELD} runs begun by \
         wakes of the session were held (each fenced by the next, none dropped), over {HELD}, \
         after one warm-up wake; {rss}; target (snapshots on): at 100,000 steps <= 2x at 10"
    ));
    if len > 10 {
        row = row.vs("at 10 steps", Compare::rate_only(format!("long.memory.{}.10", c.tag), 1.0));
    }
    if c.tag == "on" && with_off {
        row = row.vs("snapshots off", Compare::rate_only(format!("long.memory.off.{len}"), 1.0));
    }
    table.push(row);
    Ok(())
}
