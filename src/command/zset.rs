//! zset commands.

use super::CommandSpec;

/// The sorted_set family's table.
pub static COMMANDS: &[CommandSpec] = &[];
