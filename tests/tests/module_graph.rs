//! Dependencies point one way between the modules of every crate of the workspace: no two
//! modules use each other, directly or around a longer loop (`stepjournal_tests::modules` says
//! how uses are read).

use std::path::Path;

use stepjournal_tests::modules::Crate;

/// Every crate's `src/`, from the workspace's root.
const CRATES: [&str; 9] =
    ["codec", "recovery", "backends", "journal", "sim", "cli", "bench", "tests", "bindings/node"];

#[test]
fn no_two_modules_of_a_crate_use_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for name in CRATES {
        let src = root.join(name).join("src");
        let krate = Crate::read(&src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
        assert!(!krate.edges().is_empty(), "{name}: no use between modules was read at all");
        for cycle in krate.cycles() {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            found.push(format!("{name}: {}", names.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "modules that use each other:\n{}", found.join("\n"));
}
