//! Fuzz target `canonical_bytes`: the body is `reference_gate::fuzzing::fuzz_canonical_bytes` (see its docs for the property).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reference_gate::fuzzing::fuzz_canonical_bytes(data));
