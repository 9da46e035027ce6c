//! The reference authorization gate: authorize-before-forward for MCP (DESIGN.md section 5).
//!
//! One raw JSON-RPC message in: [`canonical`] parses it strictly and re-serializes it; [`policy`]
//! decides exactly once per `tools/call`; [`proxy`] coordinates and answers from a fixed error
//! table; [`forward`] sends only canonical bytes downstream. [`front`] holds the Streamable HTTP
//! and stdio servers, [`config`] the configuration file, [`trace`] the decision log, [`era`] the
//! protocol versions (legacy sessions, modern per-request metadata and header binding).
//!
//! **Architecture invariant:** this crate depends on nothing of the mcp-gauntlet suite; it is a
//! product a team can deploy on its own.

#![warn(unreachable_pub)]

pub mod auth;
pub mod canonical;
pub mod cli;
pub mod config;
pub(crate) mod era;
pub use era::Version;
pub mod faults;
pub mod forward;
pub mod front;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod policy;
pub mod proxy;
pub(crate) mod relay;
pub mod tls;
pub mod trace;
pub(crate) mod uri;

/// An error and its causes in one line, `error: cause: cause`, for output: each message says
/// only its own part, so nothing is printed twice.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        next = cause.source();
    }
    out
}
