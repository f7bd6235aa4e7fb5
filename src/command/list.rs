//! list commands.

use super::CommandSpec;

/// The list family's table.
pub static COMMANDS: &[CommandSpec] = &[];
