#![expect(clippy::unwrap_used, clippy::panic, reason = "a test fails by panicking")]

use super::*;

#[test]
fn actors_one_variant_runs() {
    let v: ActorVariant = "crashed-unsafe/r1+r2/skew+0/t1".parse().unwrap();
    let summary = explore_actors(&[v], Options::default()).unwrap();
    println!("{}", summary.counts_line());
    print!("{}", summary.findings_text());
    assert!(summary.findings.is_empty());
}
