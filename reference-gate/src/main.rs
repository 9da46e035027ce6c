//! The `reference-gate` command: see [`reference_gate::cli`].

fn main() -> std::process::ExitCode {
    reference_gate::cli::main_from_args(std::env::args_os())
}
