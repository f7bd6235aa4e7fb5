//! The settings of a replica (docs/replication.md §5.1): whom to follow
//! (`replicaof`, also `slaveof` and the `--replicaof host port` flag), how
//! to authenticate to it, and how clients are served meanwhile.

/// Replication as replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSettings {
    /// `replicaof <host> <port>` from the configuration file or flags
    /// (`replicaof no one` clears it). Not a CONFIG parameter (Redis's
    /// rule): REPLICAOF changes the running server's master.
    pub replicaof: Option<(String, u16)>,
    /// `masterauth`: the password sent with `AUTH` to the master.
    pub masterauth: Option<Vec<u8>>,
    /// `masteruser`: the user of that `AUTH`.
    pub masteruser: Option<Vec<u8>>,
    /// `replica-read-only` (yes): writes from clients are refused.
    pub read_only: bool,
    /// `replica-serve-stale-data` (yes): with the link down, commands
    /// without the `stale` flag get `-MASTERDOWN` when no.
    pub serve_stale_data: bool,
    /// `replica-priority` (100): reported in INFO for Sentinel.
    pub priority: u64,
    /// `replica-announced` (yes): reported in INFO for Sentinel.
    pub announced: bool,
    /// `replica-announce-ip`: sent to the master with `REPLCONF
    /// ip-address` (NAT, containers), which then lists us under it.
    pub announce_ip: Option<Vec<u8>>,
    /// `replica-announce-port` (0: our own port): sent with `REPLCONF
    /// listening-port`.
    pub announce_port: u16,
    /// `repl-diskless-load` (disabled): where a full sync's payload goes
    /// before it is loaded (docs/replication.md §5.3).
    pub diskless_load: DisklessLoad,
    /// `propagation-error-behavior` (ignore): what a replica does when a
    /// command from its master fails (an index into
    /// `PROPAGATION_ERROR_BEHAVIORS`). hozon's own AOF replay refuses
    /// any failing command whatever this says.
    pub propagation_error_behavior: usize,
}

/// `propagation-error-behavior` values, in Redis's order: log and go on,
/// or log and stop the process (`panic` also covers Redis's AOF loading,
/// which in hozon always stops at a failing command).
pub const PROPAGATION_ERROR_BEHAVIORS: &[&str] = &["ignore", "panic", "panic-on-replicas"];

/// `repl-diskless-load`: Redis's three values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DisklessLoad {
    /// `disabled`: the payload goes to a temporary file, verified whole,
    /// then loaded.
    #[default]
    Disabled,
    /// `on-empty-db`: into memory when the dataset is empty, else as
    /// `disabled`.
    OnEmptyDb,
    /// `swapdb`: always into memory, loaded beside the old dataset.
    Swapdb,
}

impl DisklessLoad {
    /// The words, in the order of the index CONFIG uses.
    pub const WORDS: &'static [&'static str] = &["disabled", "on-empty-db", "swapdb"];

    /// The index of the value in [`DisklessLoad::WORDS`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The value at `index` of [`DisklessLoad::WORDS`].
    pub fn from_index(index: usize) -> DisklessLoad {
        match index {
            1 => DisklessLoad::OnEmptyDb,
            2 => DisklessLoad::Swapdb,
            _ => DisklessLoad::Disabled,
        }
    }

    /// Whether the payload goes to memory, given whether the dataset is
    /// empty (Redis's `useDisklessLoad`).
    pub fn in_memory(self, dataset_empty: bool) -> bool {
        match self {
            DisklessLoad::Disabled => false,
            DisklessLoad::OnEmptyDb => dataset_empty,
            DisklessLoad::Swapdb => true,
        }
    }
}

impl Default for ReplicaSettings {
    fn default() -> Self {
        ReplicaSettings {
            replicaof: None,
            masterauth: None,
            masteruser: None,
            read_only: true,
            serve_stale_data: true,
            priority: 100,
            announced: true,
            announce_ip: None,
            announce_port: 0,
            diskless_load: DisklessLoad::Disabled,
            propagation_error_behavior: 0,
        }
    }
}

/// Parses the arguments of a `replicaof` line: `no one` clears the master
/// (Ok(None)); otherwise a host and a port in 0..=65535.
pub(super) fn parse_replicaof(host: &[u8], port: &[u8]) -> Result<Option<(String, u16)>, String> {
    if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        return Ok(None);
    }
    let port = std::str::from_utf8(port)
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
        .ok_or_else(|| "Invalid master port".to_string())?;
    Ok(Some((String::from_utf8_lossy(host).into_owned(), port)))
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn replicaof_and_slaveof_lines_set_and_clear_the_master() {
        let mut config = Config::default();
        config.apply_text(b"slaveof 10.0.0.1 6380\n").unwrap();
        assert_eq!(config.replica.replicaof, Some(("10.0.0.1".into(), 6380)));
        config.apply_text(b"replicaof NO one\n").unwrap();
        assert_eq!(config.replica.replicaof, None);
        assert!(config.apply_text(b"replicaof host 70000\n").is_err());
        config
            .apply_text(b"masterauth pw\nreplica-read-only no\nslave-priority 7\n")
            .unwrap();
        assert_eq!(config.replica.masterauth.as_deref(), Some(&b"pw"[..]));
        assert!(!config.replica.read_only);
        assert_eq!(config.replica.priority, 7);
        assert!(config.apply_text(b"repl-diskless-load nope\n").is_err());
    }

    #[test]
    fn repl_diskless_load_takes_redis_three_values() {
        use super::DisklessLoad;
        let mut config = Config::default();
        assert_eq!(config.replica.diskless_load, DisklessLoad::Disabled);
        config.apply_text(b"repl-diskless-load swapdb\n").unwrap();
        assert_eq!(config.replica.diskless_load, DisklessLoad::Swapdb);
        config
            .apply_text(b"repl-diskless-load ON-EMPTY-DB\n")
            .unwrap();
        assert_eq!(config.replica.diskless_load, DisklessLoad::OnEmptyDb);
        let param = crate::config::params::lookup(b"repl-diskless-load").unwrap();
        assert_eq!(param.get(&config), b"on-empty-db".to_vec());
        let err = config
            .apply_text(b"repl-diskless-load sometimes\n")
            .unwrap_err();
        assert!(
            err.message.contains(
                "argument(s) must be one of the following: disabled, on-empty-db, swapdb"
            ),
            "{err}"
        );
        assert!(DisklessLoad::OnEmptyDb.in_memory(true));
        assert!(!DisklessLoad::OnEmptyDb.in_memory(false));
        assert!(DisklessLoad::Swapdb.in_memory(false));
        assert!(!DisklessLoad::Disabled.in_memory(true));
    }
}
