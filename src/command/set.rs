//! set commands.

use super::CommandSpec;

/// The set family's table.
pub static COMMANDS: &[CommandSpec] = &[];
