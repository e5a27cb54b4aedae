//! Fuzz target `bundle_file`: see `afr_fuzz::oracles::bundle_file` for the property checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    afr_fuzz::oracles::bundle_file(data);
});
