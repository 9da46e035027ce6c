//! Process exit codes, as named constants. They are part of the command-line contract and are
//! documented in README.md.

/// Every trial passed (warnings allowed).
pub const SUCCESS: u8 = 0;
/// At least one trial failed.
pub const CASES_FAILED: u8 = 1;
/// The command line was not understood.
pub const USAGE: u8 = 2;
/// The run could not start: a case file is invalid, or the target could not be started or reached.
pub const SETUP_FAILED: u8 = 3;
