//! Why a run, a fuzz session, a load or a bench could not start or finish its output: one error
//! type for everything that sets up a target and writes reports (trials' own failures are
//! verdicts, not errors).

use crate::report;

/// An error and its causes in one line (`error: cause: cause`): messages say only their own
/// part, the causes are their `source`s. Anything that turns an error into text uses this.
pub use reference_gate::error_chain;

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error(transparent)]
    Case(#[from] crate::case::CaseError),
    #[error(transparent)]
    Transport(#[from] crate::transport::TransportError),
    #[error("cannot start the embedded witness (is loopback available?)")]
    Witness(#[source] std::io::Error),
    #[error("cannot write {path} (check that its directory exists and is writable)")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`--header` wants `Name: value`, got `{0}`")]
    BadHeader(String),
    #[error("cannot set up the run (temporary files, the runtime, or this program's own path)")]
    Setup(#[source] std::io::Error),
    #[error("the embedded reference gate cannot be set up")]
    Gate(#[from] reference_gate::cli::GateError),
    #[error("not a command the runner can start: {0}")]
    BadTarget(String),
    #[error("the gate did not accept connections on 127.0.0.1:{0} within 10 s")]
    GateDidNotStart(u16),
    #[error("{target} cannot be tested: {reason}")]
    Untestable {
        target: String,
        kind: Untestable,
        reason: String,
    },
    #[error(transparent)]
    Baseline(#[from] report::baseline::BaselineError),
    #[error("{url}: the TLS handshake failed (pass --ca FILE to trust the CA that signed its certificate, or --insecure to check none)")]
    Certificate {
        url: String,
        #[source]
        source: std::io::Error,
    },
}

/// Why a target cannot be tested at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Untestable {
    /// Its program cannot be found or started.
    NoProgram,
    /// Nothing accepts connections where it should be.
    Unreachable,
    /// It answers, but speaks no protocol version the suite knows (the version probe).
    NoVersion,
}

impl RunError {
    /// Whether the target answered, though it could not be tested (no version it speaks).
    pub fn target_answered(&self) -> bool {
        matches!(
            self,
            RunError::Untestable {
                kind: Untestable::NoVersion,
                ..
            }
        )
    }

    /// Whether the error says the target could not be tested at all (exit code
    /// [`crate::exit::UNTESTABLE`]), not that the suite's own inputs are wrong: a gate that
    /// never started, a URL nothing listens at, a command that cannot be found.
    pub fn target_untestable(&self) -> bool {
        matches!(
            self,
            RunError::Untestable { .. } | RunError::GateDidNotStart(_)
        )
    }
}
