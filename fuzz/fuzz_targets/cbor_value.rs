//! Fuzz target `cbor_value`: see `afr_fuzz::oracles::cbor_value` for the property checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    afr_fuzz::oracles::cbor_value(data);
});
