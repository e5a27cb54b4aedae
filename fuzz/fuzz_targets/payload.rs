//! Fuzz target `payload`: see `afr_fuzz::oracles::payload` for the property checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    afr_fuzz::oracles::payload(data);
});
