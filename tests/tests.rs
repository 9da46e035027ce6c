//! The integration tests: one binary, one module per area (see each module's docs).

mod broken;
mod util;
mod catalogue;
mod hostile;
mod cli;
