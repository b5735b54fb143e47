//! Reading a conformance scenario from arbitrary text, and planning it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepjournal_tests::checks::check_scenario_json;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = check_scenario_json(data) {
        panic!("{e}");
    }
});
