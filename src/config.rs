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
        }
    }
}
