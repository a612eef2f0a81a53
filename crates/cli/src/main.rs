//! The `railyard` program (the command line lives in the library, `lib.rs`).

fn main() -> std::process::ExitCode {
    railyard_cli::main()
}
