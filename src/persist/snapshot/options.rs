//! How a snapshot is read: the one options struct every reader takes.

use crate::types::EncodingLimits;

/// How the snapshot readers ([`load`](fn@super::load),
/// [`load_into`](super::load_into), [`load_streaming`](super::load_streaming),
/// [`scan_keys`](super::scan_keys), [`load_salvaging`](super::load_salvaging),
/// [`salvage_streaming`](super::salvage_streaming)) decode a file.
///
/// The default reads every key (no expiry applied), with the default
/// encoding limits, on the calling thread alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Decoding threads started besides the calling thread, which always
    /// works too: it takes the decoded blocks in file order (stitching,
    /// delivering or inserting their keys) and decodes a block itself
    /// while the one due next is not ready. 0: no thread is started, the
    /// calling thread does everything. With `n` cores, `n - 1` keeps each
    /// busy.
    pub workers: usize,
    /// Encoding thresholds for the values built (what OBJECT ENCODING
    /// reports once loaded).
    pub limits: EncodingLimits,
    /// Keys whose expiry (Unix ms) is before this time are left out and
    /// counted; `i64::MIN` keeps every key.
    pub now_ms: i64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            workers: 0,
            limits: EncodingLimits::default(),
            now_ms: i64::MIN,
        }
    }
}
