//! hash commands.

use super::CommandSpec;

/// The hash family's table.
pub static COMMANDS: &[CommandSpec] = &[];
