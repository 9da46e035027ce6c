//! mcp-gauntlet: a conformance and fuzz suite for MCP transports.
//!
//! Data flows one way: [`case`] (files) -> [`transport`] (bytes on the wire, an
//! [`transport::Observation`] back) -> [`verdict`] (oracles) -> [`report`] (libtest trials, JSON).
//! [`witness`] is the recording MCP server the suite runs against and judges gates by;
//! [`run`] wires the pieces for one invocation. Binaries are thin: see `src/main.rs`.

pub mod advisory;
pub mod auth;
pub mod bench;
pub mod campaign;
mod canary;
pub mod case;
pub mod error;
pub mod exit;
pub mod fuzz;
pub mod identity;
mod lane_id;
pub mod load;
pub mod mapping;
mod progress;
mod reading;
mod record;
pub mod report;
pub mod run;
pub mod settings;
mod sync;
pub mod target;
#[cfg(test)]
mod testing;
pub mod transport;
mod trial;
mod verdict;
pub mod versions;
pub mod witness;
