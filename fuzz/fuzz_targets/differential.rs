//! Fuzz target `differential`: the body is `mcp_gauntlet::fuzz::targets::fuzz_differential` (see its docs for the property).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_gauntlet::fuzz::targets::fuzz_differential(data));
