//! Engine configuration, with Redis's parameter names.

use std::path::PathBuf;

use crate::types::EncodingLimits;

/// Configuration of an [`Engine`](crate::Engine).
#[derive(Debug, Clone)]
pub struct Config {
    /// `databases`: number of numbered databases (16).
    pub databases: usize,
    /// `dir`: the data directory (`./data`).
    pub dir: PathBuf,
    /// `requirepass`: the password clients must AUTH with, if any.
    pub requirepass: Option<Vec<u8>>,
    /// `hz`: background task frequency (10 per second).
    pub hz: u32,
    /// `*-max-listpack-*` and `set-max-intset-entries`.
    pub limits: EncodingLimits,
    /// `proto-max-bulk-len`: largest bulk string accepted (512 MB).
    pub proto_max_bulk_len: u64,
    /// `bind`: addresses the server listens on (`127.0.0.1`); a leading
    /// `-` marks an address that may be unavailable.
    pub bind: Vec<String>,
    /// `port`: TCP port (6379).
    pub port: u16,
    /// `protected-mode`: refuse non-loopback clients when no password is set.
    pub protected_mode: bool,
    /// `maxclients`: most simultaneous clients (10000).
    pub maxclients: u64,
    /// `timeout`: close clients idle this many seconds (0 = never).
    pub timeout_s: u64,
    /// `client-query-buffer-limit`: largest unprocessed input per client (1 GB).
    pub client_query_buffer_limit: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            databases: 16,
            dir: PathBuf::from("./data"),
            requirepass: None,
            hz: 10,
            limits: EncodingLimits::default(),
            proto_max_bulk_len: 512 * 1024 * 1024,
            bind: vec!["127.0.0.1".into()],
            port: 6379,
            protected_mode: true,
            maxclients: 10000,
            timeout_s: 0,
            client_query_buffer_limit: 1024 * 1024 * 1024,
        }
    }
}
