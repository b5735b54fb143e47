//! The recovery fold and planner over structured logs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepjournal_tests::checks::{FoldInput, check_fold_and_plan};

fuzz_target!(|data: &[u8]| {
    // Decoded exactly as `tests/fuzz_corpus.rs` decodes the committed corpus.
    let Some(input) = FoldInput::from_bytes(data) else { return };
    if let Err(e) = check_fold_and_plan(&input) {
        panic!("{e}");
    }
});
