//! The record and batch decoders on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepjournal_tests::checks::{check_batch_bytes, check_record_bytes};

fuzz_target!(|data: &[u8]| {
    if let Err(e) = check_record_bytes(data).and_then(|()| check_batch_bytes(data)) {
        panic!("{e}");
    }
});
