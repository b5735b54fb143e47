//! Opening a file journal whose segment bytes are arbitrary, on the simulated disk.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepjournal_tests::checks::check_file_journal_bytes;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = check_file_journal_bytes(data) {
        panic!("{e}");
    }
});
