//! A dataset being loaded on a background thread: the files read at
//! startup (docs/persistence.md, "Loading at startup") or a full sync's
//! payload (docs/replication.md §5.3). What INFO reports meanwhile: the
//! thread counts what it loaded in shared counters, and INFO shows
//! Redis's `loading:1` or `async_loading:1` with the `loading_*` fields.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counters the loading thread moves and INFO reads.
#[derive(Debug, Default)]
pub(crate) struct LoadCounters {
    /// Keys inserted into the new keyspace so far.
    pub(crate) keys_loaded: AtomicU64,
    /// Keys the payload's RESIZEDB hints announce (0 without hints).
    pub(crate) keys_expected: AtomicU64,
    /// Bytes to load, when the thread learns it (the files it maps at
    /// startup); added to `SyncLoad::total_bytes`.
    pub(crate) total_bytes: AtomicU64,
    /// Bytes loaded, when the loader knows (an AOF's offsets, or its own
    /// estimate from the keys of a snapshot part); 0: estimated from the
    /// keys.
    pub(crate) bytes_loaded: AtomicU64,
}

/// A payload load in progress.
#[derive(Debug, Clone)]
pub(crate) struct SyncLoad {
    /// Unix ms when the load started.
    pub(crate) started_ms: i64,
    /// The payload's length in bytes.
    pub(crate) total_bytes: u64,
    /// The thread's counters.
    pub(crate) counters: Arc<LoadCounters>,
    /// The old data is served meanwhile (Redis's `async_loading`: a
    /// replica's diskless `swapdb` load of the history it already
    /// follows); otherwise commands without the `loading` flag are
    /// refused with -LOADING.
    pub(crate) asynchronous: bool,
}

impl SyncLoad {
    /// A load of `total_bytes` starting now.
    pub(crate) fn new(started_ms: i64, total_bytes: u64) -> SyncLoad {
        SyncLoad {
            started_ms,
            total_bytes,
            counters: Arc::new(LoadCounters::default()),
            asynchronous: false,
        }
    }

    /// Bytes to load.
    pub(crate) fn total(&self) -> u64 {
        self.total_bytes + self.counters.total_bytes.load(Ordering::Relaxed)
    }

    /// Bytes loaded: what the loader reported, else estimated from the
    /// keys loaded against the keys the RESIZEDB hints announce.
    pub(crate) fn loaded_bytes(&self) -> u64 {
        let reported = self.counters.bytes_loaded.load(Ordering::Relaxed);
        if reported > 0 {
            return reported.min(self.total());
        }
        let loaded = self.counters.keys_loaded.load(Ordering::Relaxed);
        let expected = self.counters.keys_expected.load(Ordering::Relaxed);
        if expected == 0 {
            return 0;
        }
        let share = (loaded.min(expected) as f64) / expected as f64;
        (self.total() as f64 * share) as u64
    }

    /// INFO persistence's `loading_*` lines (Redis 7.0's names and
    /// order; the ETA as Redis computes it).
    pub(crate) fn info_lines(&self, now_ms: i64) -> Vec<String> {
        let loaded = self.loaded_bytes();
        let total = self.total();
        let (perc, remaining) = if total > 0 {
            (
                loaded as f64 * 100.0 / total as f64,
                total.saturating_sub(loaded),
            )
        } else {
            (0.0, 1)
        };
        let elapsed = (now_ms - self.started_ms).max(0) / 1000;
        let eta = if elapsed == 0 {
            1
        } else {
            (elapsed as u128 * remaining as u128 / (loaded as u128 + 1)) as i64
        };
        vec![
            format!("loading_start_time:{}", self.started_ms / 1000),
            format!("loading_total_bytes:{total}"),
            "loading_rdb_used_mem:0".to_string(),
            format!("loading_loaded_bytes:{loaded}"),
            format!("loading_loaded_perc:{perc:.2}"),
            format!("loading_eta_seconds:{eta}"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::SyncLoad;
    use std::sync::atomic::Ordering;

    #[test]
    fn progress_follows_the_keys_loaded() {
        let load = SyncLoad::new(10_000, 1000);
        assert_eq!(load.loaded_bytes(), 0);
        load.counters.keys_expected.store(10, Ordering::Relaxed);
        load.counters.keys_loaded.store(5, Ordering::Relaxed);
        assert_eq!(load.loaded_bytes(), 500);
        let lines = load.info_lines(12_000);
        assert_eq!(lines[0], "loading_start_time:10");
        assert!(lines.contains(&"loading_loaded_perc:50.00".to_string()));
        // Redis's estimate: elapsed * remaining / (loaded + 1) = 2 * 500 / 501.
        assert!(lines.contains(&"loading_eta_seconds:1".to_string()));
    }

    #[test]
    fn reported_bytes_and_totals_win_over_the_key_estimate() {
        let load = SyncLoad::new(10_000, 0);
        load.counters.total_bytes.store(2000, Ordering::Relaxed);
        load.counters.keys_expected.store(10, Ordering::Relaxed);
        load.counters.keys_loaded.store(5, Ordering::Relaxed);
        assert_eq!(load.loaded_bytes(), 1000);
        load.counters.bytes_loaded.store(1500, Ordering::Relaxed);
        assert_eq!(load.loaded_bytes(), 1500);
        let lines = load.info_lines(10_500);
        assert!(lines.contains(&"loading_total_bytes:2000".to_string()));
        assert!(lines.contains(&"loading_loaded_perc:75.00".to_string()));
        // Under a second elapsed: Redis's fake 1 s.
        assert!(lines.contains(&"loading_eta_seconds:1".to_string()));
    }
}
