//! Support code of the command-line tools `hozon-inspect` and
//! `hozon-repair`, and of the fuzz checks that exercise the repair tool:
//! what more than one of them needs, compiled once here instead of being
//! copied or included by path. Not a stable API: it changes with the tools.
//!
//! Only `parse_args` needs the `tools` feature (clap); the rest builds
//! without it, as the fuzz crate builds the library. Regular expressions,
//! progress bars and the subcommands themselves stay in the binaries.

pub mod manifest;
pub mod repair;
pub mod report;
pub mod time;

/// The key arguments of a command, as COMMAND GETKEYS finds them.
pub use crate::command::keys_of;
/// Redis's glob-style matching (KEYS, SCAN MATCH), for the tools' key
/// patterns.
pub use crate::glob::matches as glob_matches;

/// The tools' exit code when the input has problems (or a repair is
/// refused); 0 is a clean input or a repair done.
pub const EXIT_PROBLEMS: u8 = 1;
/// The tools' exit code for a usage or I/O error (clap's own code for a
/// usage error).
pub const EXIT_USAGE_OR_IO: u8 = 2;

/// The subcommand `argv` calls (`create` for `XGROUP CREATE`), spelled
/// as the command table spells it, when `argv[0]` is a container command.
pub fn subcommand_name(argv: &[&[u8]]) -> Option<&'static str> {
    let spec = crate::command::lookup(argv.first()?)?;
    let sub = argv.get(1)?;
    spec.subcommands
        .iter()
        .find(|c| c.name.as_bytes().eq_ignore_ascii_case(sub))
        .map(|c| c.name)
}

/// Parses the command line into `C`. On `--help` or `--version` (exit 0)
/// and on a usage error (exit [`EXIT_USAGE_OR_IO`]) it prints clap's text
/// and returns the exit code to end with.
#[cfg(feature = "tools")]
pub fn parse_args<C: clap::Parser>() -> Result<C, std::process::ExitCode> {
    C::try_parse().map_err(|e| {
        let code = if e.use_stderr() { EXIT_USAGE_OR_IO } else { 0 };
        let _ = e.print();
        std::process::ExitCode::from(code)
    })
}
