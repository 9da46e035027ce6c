//! Process exit codes, as named constants. They are part of the command-line contract and are
//! documented in README.md.

/// Every trial passed (warnings allowed).
pub const SUCCESS: u8 = 0;
/// At least one trial failed.
pub const CASES_FAILED: u8 = 1;
/// The command line was not understood.
pub const USAGE: u8 = 2;
/// The run could not start on the suite's side: a case file, a baseline or another input is
/// invalid, or a report cannot be written.
pub const SETUP_FAILED: u8 = 3;
/// The target could not be tested: it never started (a gate the runner starts), nothing
/// accepts connections at its URL, its command cannot be found, or the version probe found
/// nothing it speaks (and `--spec` did not name versions). No trial ran. Also a run whose every
/// selected trial was not applicable to the target (a filter of gate cases against a server).
pub const UNTESTABLE: u8 = 4;
/// The target died during the run and was not brought back (no `--restart-cmd`, or it did not
/// bring the target back): the trials
/// after its death were not run, so the verdict is incomplete. The reports hold what did run.
pub const INCOMPLETE: u8 = 5;
