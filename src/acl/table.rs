//! The command table ACL rules are written against: every command and
//! subcommand of Redis 7.0's table (its `orig_commands`, renames not
//! applied), each with an id (its bit in a selector's bitmap), its parent
//! and its ACL categories. The command layer builds it from the generated
//! metadata and installs it before the first user exists
//! (`command::acl::install_table`).

use std::collections::HashMap;
use std::sync::OnceLock;

/// One command or subcommand.
#[derive(Debug)]
pub struct Entry {
    /// Full lower-case name: `get`, `config|get`.
    pub name: &'static str,
    /// Category bits (bit `i` is the table's `categories[i]`), implied
    /// ones included.
    pub categories: u32,
    /// The container's id, for a subcommand.
    pub parent: Option<usize>,
    /// The subcommands' ids, for a container.
    pub children: Vec<usize>,
    /// Runs before authentication (AUTH, HELLO): never refused by ACL.
    pub no_auth: bool,
}

/// The table: entries by id, ids by full name.
#[derive(Debug)]
pub struct Table {
    /// Entries, the id being the index; containers before their
    /// subcommands.
    pub entries: Vec<Entry>,
    /// Category names, in ACL CAT's order.
    pub categories: &'static [&'static str],
    /// Ids by full name (foldhash: the names are ours, and every
    /// checked command looks one up).
    by_name: HashMap<&'static str, usize, foldhash::fast::FixedState>,
}

static TABLE: OnceLock<Table> = OnceLock::new();

/// Installs the table once: `commands` gives (full name, category bits,
/// no-auth) for every command, a container before its subcommands.
pub fn install(
    categories: &'static [&'static str],
    commands: impl FnOnce() -> Vec<(&'static str, u32, bool)>,
) {
    TABLE.get_or_init(|| {
        let mut entries: Vec<Entry> = Vec::new();
        let mut by_name = HashMap::with_hasher(foldhash::fast::FixedState::default());
        for (name, cats, no_auth) in commands() {
            let parent = name
                .split_once('|')
                .and_then(|(top, _)| by_name.get(top).copied());
            let id = entries.len();
            entries.push(Entry {
                name,
                categories: cats,
                parent,
                children: Vec::new(),
                no_auth,
            });
            if let Some(p) = parent {
                entries[p].children.push(id);
            }
            by_name.insert(name, id);
        }
        Table {
            entries,
            categories,
            by_name,
        }
    });
}

/// The installed table.
pub fn table() -> &'static Table {
    TABLE
        .get()
        .expect("the ACL command table is installed before users exist")
}

/// The bit of the category named `name` (any case), if there is one.
pub fn category(name: &[u8]) -> Option<u32> {
    table()
        .categories
        .iter()
        .position(|n| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

impl Table {
    /// The id of `name` (`get`, `config|get`; any case).
    pub fn id(&self, name: &[u8]) -> Option<usize> {
        let lower = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        self.by_name.get(lower.as_str()).copied()
    }

    /// The id of an exact lower-case full name.
    #[cfg(test)]
    pub fn id_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Number of ids (the bitmap's length in bits).
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}
