//! The actor search: every interleaving of one actor variant, breadth first by its number of
//! moves, each a fresh execution of its moves; states keyed so that interleavings reaching one
//! state go on from it once, and the distinct interleavings counted over the graph of states.

use std::collections::{HashMap, HashSet, VecDeque};

use super::check::check;
use super::store::Judge;
use super::variant::ActorVariant;
use super::world::{Interleaving, World};
use crate::Violation;

/// What searching one variant (or a whole scope) counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ActorCounts {
    /// Actor variants searched.
    pub variants: u64,
    /// Executions run (one per interleaving prefix made, from the start).
    pub executions: u64,
    /// Distinct states reached (by their key).
    pub states: u64,
    /// Moves from a state to the next one, distinct by their two states.
    pub transitions: u64,
    /// Distinct interleavings: the paths from the start to an end (a state with no move left)
    /// through the graph of distinct states (saturating).
    pub interleavings: u128,
    /// States that broke an invariant.
    pub failing: u64,
}

impl ActorCounts {
    pub(crate) fn add(&mut self, other: ActorCounts) {
        self.variants += other.variants;
        self.executions += other.executions;
        self.states += other.states;
        self.transitions += other.transitions;
        self.interleavings = self.interleavings.saturating_add(other.interleavings);
        self.failing += other.failing;
    }
}

/// An interleaving that broke an invariant.
#[derive(Debug, Clone)]
pub struct ActorFinding {
    /// The variant.
    pub variant: ActorVariant,
    /// The moves, in order: replay with `--actors VARIANT --interleaving MOVES`.
    pub interleaving: Interleaving,
    /// What it broke.
    pub violations: Vec<Violation>,
    /// What happened, move by move, and each actor's operations.
    pub trace: Vec<String>,
}

/// One execution of `moves`: its last state's key, the moves open there, what it breaks.
pub(crate) struct Ran {
    pub(crate) key: u64,
    pub(crate) moves: Vec<super::world::Move>,
    pub(crate) violations: Vec<Violation>,
    pub(crate) trace: Vec<String>,
}

/// Runs `moves` from the start, checking the state it ends in.
pub(crate) fn run(variant: &ActorVariant, moves: &Interleaving, judge: Judge) -> Ran {
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut world = World::new(variant, judge);
        for &m in &moves.0 {
            world.apply(m);
        }
        let violations = check(&world);
        let mut trace = world.trace.clone();
        for actor in &world.actors {
            trace.push(format!("{}: {}", actor.name, actor.history.join(", ")));
        }
        for (session, log) in world.shared.logs() {
            let kinds: Vec<&str> = log.iter().map(|r| r.event.kind().name()).collect();
            trace.push(format!("log of {session}: {}", kinds.join(" ")));
        }
        Ran { key: world.key(), moves: world.moves(), violations, trace }
    }));
    ran.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic".to_owned());
        Ran {
            key: 0,
            moves: Vec::new(),
            violations: vec![Violation::Unexpected { what: format!("an actor panicked: {what}") }],
            trace: Vec::new(),
        }
    })
}

/// Searches every interleaving of `variant`; returns the counts and the failing ones (the
/// first `keep`, fewest moves first; with `first_only`, the search stops at the first).
pub(crate) fn search(
    variant: &ActorVariant,
    judge: Judge,
    keep: usize,
    first_only: bool,
) -> (ActorCounts, Vec<ActorFinding>) {
    let mut counts = ActorCounts { variants: 1, ..ActorCounts::default() };
    let mut findings = Vec::new();
    let mut children: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let root = run(variant, &Interleaving::default(), judge);
    counts.executions += 1;
    let root_key = root.key;
    seen.insert(root_key);
    let mut queue = VecDeque::from([(Interleaving::default(), root)]);
    'search: while let Some((prefix, here)) = queue.pop_front() {
        let mut next = Vec::with_capacity(here.moves.len());
        for &m in &here.moves {
            let mut longer = prefix.clone();
            longer.0.push(m);
            let ran = run(variant, &longer, judge);
            counts.executions += 1;
            next.push(ran.key);
            if !seen.insert(ran.key) {
                continue;
            }
            if !ran.violations.is_empty() {
                counts.failing += 1;
                if findings.len() < keep {
                    findings.push(ActorFinding {
                        variant: variant.clone(),
                        interleaving: longer,
                        violations: ran.violations,
                        trace: ran.trace,
                    });
                }
                if first_only {
                    break 'search;
                }
                continue;
            }
            queue.push_back((longer, ran));
        }
        next.sort_unstable();
        next.dedup();
        counts.transitions += next.len() as u64;
        children.insert(here.key, next);
    }
    counts.states = seen.len() as u64;
    counts.interleavings = paths(root_key, &children);
    (counts, findings)
}

/// The paths from `root` to an end through `children` (a state with no children, or one not
/// expanded, ends a path), counted once per state by memo; a move back to a state on the path
/// (none is expected: every move spends something) ends it too.
fn paths(root: u64, children: &HashMap<u64, Vec<u64>>) -> u128 {
    let mut memo: HashMap<u64, u128> = HashMap::new();
    let mut on_path: HashSet<u64> = HashSet::new();
    // An explicit stack: (state, whether its children were pushed).
    let mut stack = vec![(root, false)];
    while let Some((state, expanded)) = stack.pop() {
        if memo.contains_key(&state) {
            continue;
        }
        let kids = children.get(&state).map(Vec::as_slice).unwrap_or(&[]);
        if kids.is_empty() {
            memo.insert(state, 1);
            continue;
        }
        if expanded {
            on_path.remove(&state);
            let total = kids
                .iter()
                .map(|k| memo.get(k).copied().unwrap_or(1))
                .fold(0u128, u128::saturating_add);
            memo.insert(state, total);
            continue;
        }
        on_path.insert(state);
        stack.push((state, true));
        for &k in kids {
            if !memo.contains_key(&k) && !on_path.contains(&k) {
                stack.push((k, false));
            }
        }
    }
    memo.get(&root).copied().unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_counted_over_shared_states_once_each() {
        // 1 -> 2, 3; 2 -> 4; 3 -> 4; 4 -> 5, 6: four paths.
        let children =
            HashMap::from([(1, vec![2, 3]), (2, vec![4]), (3, vec![4]), (4, vec![5, 6])]);
        assert_eq!(paths(1, &children), 4);
        assert_eq!(paths(7, &children), 1);
    }
}
