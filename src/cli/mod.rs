//! The binary's own modules: its flags, one module per group of subcommands, and the one place
//! an error becomes a printed line and an exit code. Not part of the library.

pub(crate) mod campaign;
pub(crate) mod files;
pub(crate) mod flags;
pub(crate) mod live;
pub(crate) mod run;
pub(crate) mod witness;

use mcp_gauntlet::error::RunError;
use mcp_gauntlet::exit;

/// A command line the program understood but cannot use (an identity or a tool mapping that
/// contradicts itself): exit [`exit::USAGE`], as clap's own refusals do.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub(crate) struct Usage(pub(crate) Box<dyn std::error::Error + Send + Sync>);

impl Usage {
    /// `e` as a usage error, ready for `?`.
    pub(crate) fn wrap(e: impl std::error::Error + Send + Sync + 'static) -> anyhow::Error {
        anyhow::Error::new(Usage(Box::new(e)))
    }
}

/// Print `error: ` and the whole cause chain on stderr, and say which exit code it is: a
/// command line that cannot be used, a target that cannot be tested, or a setup that failed.
pub(crate) fn report_error(e: &anyhow::Error) -> u8 {
    eprintln!("error: {e:#}");
    if e.downcast_ref::<Usage>().is_some() {
        exit::USAGE
    } else if e
        .downcast_ref::<RunError>()
        .is_some_and(RunError::target_untestable)
    {
        exit::UNTESTABLE
    } else {
        exit::SETUP_FAILED
    }
}
