//! Fuzzing: the differential target's body ([`targets`]) and live-endpoint fuzzing ([`live`]):
//! structured generation from a seed, the catalogue's oracles, shrinking, and failures saved as
//! case files.

pub mod live;
pub mod targets;
