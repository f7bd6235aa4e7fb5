//! The wall clock, in the unit Redis uses for times (Unix milliseconds).

use std::time::{SystemTime, UNIX_EPOCH};

/// The current time in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
