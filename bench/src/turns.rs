//! Contenders measured side by side in turns: each group's workloads run a slice at a time, in
//! an order shuffled every round, so that a disk whose speed drifts weighs on each alike.

use std::time::Duration;

use crate::appends::Measured;
use crate::args::WorkDir;
use crate::table::{Latency, Row, Section};

/// One slice of a contender's workload: the round (for fresh session names) and the time it
/// gets; returns what it measured and the `fdatasync` calls it made, when known.
pub type Slice = Box<dyn FnMut(usize, Duration) -> Result<(Measured, Option<u64>), String>>;

/// One workload of a group, run a slice at a time.
pub struct Contender {
    group: &'static str,
    key: String,
    workload: String,
    note: String,
    slice: Slice,
    finish: Option<Box<dyn FnOnce() -> Result<(), String>>>,
    remark: Option<Box<dyn Fn() -> Option<String>>>,
    /// Measured in one piece after the turns, not in them.
    alone: bool,
}

impl std::fmt::Debug for Contender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contender").field("key", &self.key).finish_non_exhaustive()
    }
}

impl Contender {
    pub fn new(
        group: &'static str,
        key: String,
        workload: String,
        note: &str,
        slice: Slice,
    ) -> Contender {
        Contender {
            group,
            key,
            workload,
            note: note.to_owned(),
            slice,
            finish: None,
            remark: None,
            alone: false,
        }
    }

    /// Something more for the note, known once the group is measured.
    pub fn remark(mut self, f: Box<dyn Fn() -> Option<String>>) -> Contender {
        self.remark = Some(f);
        self
    }

    /// Measured in one piece after the turns: for a workload whose appends can outlast a slice
    /// by seconds.
    pub fn alone(mut self) -> Contender {
        self.alone = true;
        self
    }

    /// The same workload under another key and name (a baseline measured again in another
    /// group's turns).
    pub fn renamed(mut self, key: String, workload: String) -> Contender {
        self.key = key;
        self.workload = workload;
        self
    }

    /// Something to do once the group is measured (dropping a schema).
    pub fn finish(mut self, f: Box<dyn FnOnce() -> Result<(), String>>) -> Contender {
        self.finish = Some(f);
        self
    }
}

/// How many rounds of turns a group runs: slices of about 100 ms.
fn rounds(work: &WorkDir) -> usize {
    (work.budget().as_millis() / 100).max(2) as usize
}

/// What a contender measured over its turns.
#[derive(Debug)]
pub struct Turned {
    pub group: &'static str,
    pub key: String,
    pub workload: String,
    /// The contender's note, with its remark and how it was measured.
    pub note: String,
    pub measured: Measured,
    /// The `fdatasync` calls made, when known.
    pub syncs: Option<u64>,
}

impl Turned {
    /// The row of what the contender measured: `rate` of it in `unit`, MB/s, latency, `fdatasync`
    /// calls per append where counted, and its note.
    pub fn row(self, section: Section, rate: fn(&Measured) -> f64, unit: &'static str) -> Row {
        let m = &self.measured;
        Row::new(
            section,
            self.key,
            self.group,
            self.workload,
            rate(m),
            unit,
            m.elapsed.as_secs_f64(),
        )
        .mb(m.mb_per_sec())
        .latency(Latency::of(&m.latency))
        .fsyncs(self.syncs.map(|s| s as f64 / m.appends.max(1) as f64))
        .note(self.note)
    }
}

/// The order of `n` contenders in round `round`: a shuffle (Fisher-Yates, on a linear
/// congruential sequence seeded by the round), the same in every run.
pub fn order(n: usize, round: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = (round as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..n).rev() {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let j = ((x >> 33) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// Runs `contenders` in turns, slice after slice, round after round (those marked alone after,
/// in one piece each), then finishes each.
pub fn in_turns(work: &WorkDir, mut contenders: Vec<Contender>) -> Result<Vec<Turned>, String> {
    let rounds = rounds(work);
    let slice = work.budget() / rounds as u32;
    let mut totals: Vec<(Measured, Option<u64>)> = Vec::new();
    for _ in &contenders {
        totals.push((Measured::empty()?, Some(0)));
    }
    let n = contenders.len();
    let alone: Vec<bool> = contenders.iter().map(|c| c.alone).collect();
    let mut run = |j: usize, round: usize, budget: Duration| -> Result<(), String> {
        let (Some(c), Some(total)) = (contenders.get_mut(j), totals.get_mut(j)) else {
            return Ok(());
        };
        let (m, syncs) =
            (c.slice)(round, budget).map_err(|e| format!("{}: {}: {e}", c.group, c.key))?;
        total.0.merge(&m)?;
        total.1 = total.1.zip(syncs).map(|(a, b)| a + b);
        Ok(())
    };
    let mut measured = || -> Result<(), String> {
        for round in 0..rounds {
            // Each round in an order of its own, so that no contender always follows the same
            // one (on a disk that throttles, the one before leaves it with less to give).
            for j in order(n, round) {
                if !alone.get(j).copied().unwrap_or(false) {
                    run(j, round, slice)?;
                }
            }
        }
        for (j, _) in alone.iter().enumerate().filter(|(_, a)| **a) {
            run(j, rounds, work.budget())?;
        }
        Ok(())
    };
    if let Err(e) = measured() {
        // Finished all the same (a schema dropped), then the first failure reported.
        for c in contenders {
            let Contender { slice, finish, .. } = c;
            drop(slice);
            if let Some(finish) = finish {
                let _ = finish();
            }
        }
        return Err(e);
    }
    let mut out = Vec::with_capacity(n);
    for (c, (measured, syncs)) in contenders.into_iter().zip(totals) {
        let how = if c.alone {
            "measured alone, after the others' turns".to_owned()
        } else {
            format!("{rounds} turns of {} ms", slice.as_millis())
        };
        let note = match c.remark.as_ref().and_then(|f| f()) {
            Some(more) => format!("{}; {more}; {how}", c.note),
            None => format!("{}; {how}", c.note),
        };
        let Contender { group, key, workload, slice, finish, .. } = c;
        drop(slice);
        if let Some(finish) = finish {
            finish().map_err(|e| format!("{group}: {e}"))?;
        }
        out.push(Turned { group, key, workload, note, measured, syncs });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_runs_each_contender_once_and_predecessors_vary() {
        let n = 7;
        let mut before = vec![std::collections::BTreeSet::new(); n];
        for round in 0..30 {
            let o = order(n, round);
            let mut sorted = o.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "round {round}: {o:?}");
            for w in o.windows(2) {
                if let [a, b] = w {
                    before[*b].insert(*a);
                }
            }
        }
        // With a rotation each contender would follow one other only.
        assert!(before.iter().all(|s| s.len() >= 3), "{before:?}");
    }
}
