//! Fuzz target `record`: see `afr_fuzz::oracles::record` for the property checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    afr_fuzz::oracles::record(data);
});
