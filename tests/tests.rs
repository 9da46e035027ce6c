//! The integration tests: one binary, one module per area (see each module's docs).

mod action;
mod auth;
mod bounds;
mod broken;
mod broken_gate;
mod campaign;
mod catalogue;
mod cli;
mod fuzz;
mod gate;
mod hostile;
mod load;
mod mapping;
mod release_gate;
mod reports;
mod series;
mod tidy;
mod tls;
mod util;
mod verdicts;
