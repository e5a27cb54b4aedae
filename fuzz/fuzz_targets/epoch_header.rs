//! Fuzz target `epoch_header`: see `afr_fuzz::oracles::epoch_header` for the property checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    afr_fuzz::oracles::epoch_header(data);
});
