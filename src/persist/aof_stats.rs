//! The AOF's own figures, beyond Redis's INFO (docs/observability.md,
//! "Persistence figures"): fsync count and latency histogram, the time of
//! the last successful fsync, bytes written, the longest a client waited
//! for its batch under `appendfsync always`, and the worst write and
//! fsync durations since the cron last took them (LATENCY events).
//!
//! The background fsync thread and the command thread share
//! [`FsyncStats`], atomics only: recording costs a few relaxed atomic
//! operations and never takes a lock.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Buckets of the fsync histogram: bucket `i` counts fsyncs that took
/// less than 2^(i+1) µs (the last one everything longer).
pub const FSYNC_BUCKETS: usize = 26;

/// Fsync figures shared with the background fsync thread.
#[derive(Debug)]
pub struct FsyncStats {
    count: AtomicU64,
    last_ok_ms: AtomicI64,
    max_us: AtomicU64,
    /// Worst background fsync (ms) since the cron last took it.
    pending_worst_ms: AtomicU64,
    buckets: [AtomicU64; FSYNC_BUCKETS],
}

impl Default for FsyncStats {
    fn default() -> Self {
        FsyncStats {
            count: AtomicU64::new(0),
            last_ok_ms: AtomicI64::new(0),
            max_us: AtomicU64::new(0),
            pending_worst_ms: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The bucket of a duration in µs.
fn bucket(us: u64) -> usize {
    let lg = (u64::BITS - us.max(1).leading_zeros()) as usize - 1;
    lg.min(FSYNC_BUCKETS - 1)
}

impl FsyncStats {
    /// Records a successful fsync that took `us` µs, finished at `now_ms`.
    pub fn record(&self, us: u64, now_ms: i64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.last_ok_ms.fetch_max(now_ms, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
        self.pending_worst_ms
            .fetch_max(us / 1000, Ordering::Relaxed);
        self.buckets[bucket(us)].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds the figures of the file this one replaces (a rewrite's
    /// switch): counters continue across files.
    pub fn absorb(&self, previous: &FsyncSnapshot) {
        self.count.fetch_add(previous.count, Ordering::Relaxed);
        self.last_ok_ms
            .fetch_max(previous.last_ok_ms, Ordering::Relaxed);
        self.max_us.fetch_max(previous.max_us, Ordering::Relaxed);
        for (bucket, &n) in self.buckets.iter().zip(previous.buckets.iter()) {
            bucket.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Takes the worst fsync (ms) since the last call.
    pub fn take_worst_ms(&self) -> u64 {
        self.pending_worst_ms.swap(0, Ordering::Relaxed)
    }

    /// A copy of the figures.
    pub fn snapshot(&self) -> FsyncSnapshot {
        FsyncSnapshot {
            count: self.count.load(Ordering::Relaxed),
            last_ok_ms: self.last_ok_ms.load(Ordering::Relaxed),
            max_us: self.max_us.load(Ordering::Relaxed),
            buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
        }
    }
}

/// The fsync figures at one moment.
#[derive(Debug, Clone, Default)]
pub struct FsyncSnapshot {
    /// Successful fsyncs of the AOF.
    pub count: u64,
    /// Unix ms of the last successful fsync (0: none yet).
    pub last_ok_ms: i64,
    /// The longest fsync, µs.
    pub max_us: u64,
    /// Histogram counts (see [`FSYNC_BUCKETS`]).
    pub buckets: [u64; FSYNC_BUCKETS],
}

impl FsyncSnapshot {
    /// The upper bound (µs) of the bucket holding the `p`th percentile.
    pub fn percentile_us(&self, p: f64) -> u64 {
        let wanted = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= wanted {
                return 1u64 << (i + 1);
            }
        }
        0
    }
}

/// Figures kept by the command thread (the writer's own).
#[derive(Debug, Clone, Default)]
pub struct WriterStats {
    /// Bytes written to the AOF by this process.
    pub bytes_written: u64,
    /// The longest a batch's clients waited for write + fsync under
    /// `appendfsync always`, µs.
    pub always_wait_max_us: u64,
    /// Worst write(2) of a batch (ms) since the cron last took it.
    pub pending_write_ms: u64,
    /// Worst fsync under `always` (ms) since the cron last took it.
    pub pending_always_fsync_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_and_percentiles() {
        let s = FsyncStats::default();
        for _ in 0..99 {
            s.record(300, 1);
        }
        s.record(40_000, 2);
        let snap = s.snapshot();
        assert_eq!(snap.count, 100);
        assert_eq!(snap.last_ok_ms, 2);
        assert_eq!(snap.percentile_us(50.0), 512);
        assert_eq!(snap.percentile_us(100.0), 65_536);
        assert_eq!(s.take_worst_ms(), 40);
        assert_eq!(s.take_worst_ms(), 0);
    }
}
