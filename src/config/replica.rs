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
        assert!(config.apply_text(b"repl-diskless-load swapdb\n").is_err());
    }
}
