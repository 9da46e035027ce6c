//! The `mcp-gauntlet` command: parse the flags, hand each subcommand to its `cli/` module, and
//! turn the outcome into an exit code. The work is in the library.

mod cli;

use clap::Parser as _;
use cli::flags::{Cli, Command};
use mcp_gauntlet::exit;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::SUCCESS
            });
        }
    };
    let result = match cli.command.unwrap_or(Command::Run(Box::new(cli.run))) {
        Command::Run(args) => cli::run::run(*args),
        Command::Witness(args) => cli::witness::serve(*args),
        Command::Fuzz(args) => cli::live::fuzz(*args),
        Command::Load(args) => cli::live::load(*args),
        Command::Bench { requests } => cli::live::bench(requests),
        Command::Campaign(args) => cli::campaign::campaign(*args),
        Command::Matrix {
            reports,
            output,
            html,
        } => cli::files::matrix(&reports, output, html),
        Command::CheckCases { dirs } => cli::files::check_cases(&dirs),
        Command::CheckTargets { dirs } => cli::files::check_targets(&dirs),
        Command::Advisories => cli::files::advisories(),
        Command::Schema { targets } => Ok(cli::files::schema(targets)),
        Command::AuthIssuer { out, kid } => cli::files::auth_issuer(&out, &kid),
        Command::ReferenceGate { args } => {
            return reference_gate::cli::main_from_args(
                std::iter::once(std::ffi::OsString::from("reference-gate")).chain(args),
            );
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => ExitCode::from(cli::report_error(&e)),
    }
}
