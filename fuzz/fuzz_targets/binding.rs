//! Fuzz target `binding`: the body is `reference_gate::fuzzing::fuzz_binding` (see its docs for the property).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reference_gate::fuzzing::fuzz_binding(data));
