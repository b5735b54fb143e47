//! Operation sequences on the file backend over the simulated disk, with faults and crashes,
//! against a model.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepjournal_tests::checks::{FileOpsInput, check_file_ops};

fuzz_target!(|data: &[u8]| {
    // Decoded exactly as `tests/fuzz_corpus.rs` decodes the committed corpus.
    let Some(input) = FileOpsInput::from_bytes(data) else { return };
    if let Err(e) = check_file_ops(&input) {
        panic!("{e}");
    }
});
