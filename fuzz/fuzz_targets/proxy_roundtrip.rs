//! Fuzz target `proxy_roundtrip`: the body is `reference_gate::fuzzing::fuzz_roundtrip` (see its docs for the property).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reference_gate::fuzzing::fuzz_roundtrip(data));
