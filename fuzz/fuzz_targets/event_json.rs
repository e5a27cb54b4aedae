//! Fuzz target `event_json`: see `afr_fuzz::oracles::event_json` for the property checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    afr_fuzz::oracles::event_json(data);
});
