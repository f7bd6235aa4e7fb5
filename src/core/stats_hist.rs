//! A latency histogram with the bucket layout Redis's per-command
//! histograms have (HdrHistogram, lowest discernible value 1 µs, highest
//! 1 s, 2 significant digits, values in nanoseconds), so the percentiles
//! INFO `latencystats` prints and the cumulative distribution LATENCY
//! HISTOGRAM replies are the values Redis computes for the same samples.
//!
//! Only what Redis uses is here: recording a value, the value at a
//! percentile, and the logarithmic iteration (first bucket 1024 ns, base 2)
//! of LATENCY HISTOGRAM.

/// Lowest value told apart (1 µs in ns): Redis's `LATENCY_HISTOGRAM_MIN_VALUE`.
pub const MIN_VALUE: i64 = 1_000;
/// Highest value recorded (1 s in ns): Redis's `LATENCY_HISTOGRAM_MAX_VALUE`.
pub const MAX_VALUE: i64 = 1_000_000_000;

/// `floor(log2(MIN_VALUE))`.
const UNIT_MAGNITUDE: u32 = 9;
/// `ceil(log2(2 * 10^2)) - 1`: 2 significant digits.
const SUB_BUCKET_HALF_COUNT_MAGNITUDE: u32 = 7;
const SUB_BUCKET_COUNT: i64 = 1 << (SUB_BUCKET_HALF_COUNT_MAGNITUDE + 1);
const SUB_BUCKET_HALF_COUNT: i64 = SUB_BUCKET_COUNT / 2;
const SUB_BUCKET_MASK: i64 = (SUB_BUCKET_COUNT - 1) << UNIT_MAGNITUDE;
/// Buckets needed to cover `MAX_VALUE` (HdrHistogram's
/// `buckets_needed_to_cover_value`).
const BUCKET_COUNT: i64 = {
    let mut smallest_untrackable = SUB_BUCKET_COUNT << UNIT_MAGNITUDE;
    let mut buckets = 1;
    while smallest_untrackable <= MAX_VALUE {
        smallest_untrackable <<= 1;
        buckets += 1;
    }
    buckets
};
const COUNTS_LEN: usize = ((BUCKET_COUNT + 1) * SUB_BUCKET_HALF_COUNT) as usize;

/// One command's latency histogram (about 15 KiB, allocated on its first
/// sample, like Redis's).
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u32]>,
    total: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; COUNTS_LEN].into_boxed_slice(),
            total: 0,
        }
    }
}

fn bucket_index(value: i64) -> i32 {
    let pow2ceiling = 64 - (value | SUB_BUCKET_MASK).leading_zeros() as i32;
    pow2ceiling - UNIT_MAGNITUDE as i32 - (SUB_BUCKET_HALF_COUNT_MAGNITUDE as i32 + 1)
}

fn sub_bucket_index(value: i64, bucket: i32) -> i64 {
    value >> (bucket + UNIT_MAGNITUDE as i32)
}

fn counts_index(value: i64) -> usize {
    let bucket = bucket_index(value);
    let sub = sub_bucket_index(value, bucket);
    (((bucket as i64 + 1) << SUB_BUCKET_HALF_COUNT_MAGNITUDE) + sub - SUB_BUCKET_HALF_COUNT)
        as usize
}

fn value_at_index(index: usize) -> i64 {
    let index = index as i64;
    let mut bucket = (index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) - 1;
    let mut sub = (index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT;
    if bucket < 0 {
        sub -= SUB_BUCKET_HALF_COUNT;
        bucket = 0;
    }
    sub << (bucket + i64::from(UNIT_MAGNITUDE))
}

fn lowest_equivalent(value: i64) -> i64 {
    let bucket = bucket_index(value);
    sub_bucket_index(value, bucket) << (bucket + UNIT_MAGNITUDE as i32)
}

fn range_size(value: i64) -> i64 {
    let bucket = bucket_index(value);
    let sub = sub_bucket_index(value, bucket);
    let adjusted = if sub >= SUB_BUCKET_COUNT {
        bucket + 1
    } else {
        bucket
    };
    1 << (UNIT_MAGNITUDE as i32 + adjusted)
}

fn highest_equivalent(value: i64) -> i64 {
    lowest_equivalent(value) + range_size(value) - 1
}

impl Histogram {
    /// Records one duration in nanoseconds, clamped to
    /// [`MIN_VALUE`, `MAX_VALUE`] as Redis's `updateCommandLatencyHistogram`.
    pub fn record(&mut self, nanos: i64) {
        let value = nanos.clamp(MIN_VALUE, MAX_VALUE);
        let slot = &mut self.counts[counts_index(value)];
        *slot = slot.saturating_add(1);
        self.total += 1;
    }

    /// Samples recorded.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// HdrHistogram's `hdr_value_at_percentile`, in nanoseconds.
    pub fn value_at_percentile(&self, percentile: f64) -> i64 {
        let requested = percentile.min(100.0);
        let wanted = (((requested / 100.0) * self.total as f64) + 0.5) as i64;
        let wanted = wanted.max(1) as u64;
        let mut seen = 0u64;
        let mut value = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += u64::from(count);
            if seen >= wanted {
                value = value_at_index(index);
                break;
            }
        }
        if percentile == 0.0 {
            lowest_equivalent(value)
        } else {
            highest_equivalent(value)
        }
    }

    /// LATENCY HISTOGRAM's cumulative distribution: (µs, cumulative
    /// count) pairs from HdrHistogram's logarithmic iteration (first
    /// bucket 1024 ns, base 2), the steps that added samples only
    /// (Redis's `fillCommandCDF`).
    pub fn cdf(&self) -> Vec<(i64, u64)> {
        let mut out = Vec::new();
        let mut index: i64 = -1;
        let mut cumulative = 0u64;
        let mut value = 0i64;
        let mut highest = 0i64;
        let mut level = 1024i64;
        let mut level_lowest = lowest_equivalent(level);
        let mut previous = 0u64;
        loop {
            // log_iter_next
            let more = cumulative < self.total
                || (index < COUNTS_LEN as i64
                    && value_at_index((index + 1) as usize) > level_lowest);
            if !more {
                break;
            }
            loop {
                if value >= level_lowest {
                    level *= 2;
                    level_lowest = lowest_equivalent(level);
                    break;
                }
                index += 1;
                if index >= COUNTS_LEN as i64 {
                    break;
                }
                cumulative += u64::from(self.counts[index as usize]);
                value = value_at_index(index as usize);
                highest = lowest_equivalent(value) + range_size(value) - 1;
            }
            if cumulative > previous {
                out.push((highest / 1000, cumulative));
            }
            previous = cumulative;
            if index >= COUNTS_LEN as i64 {
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_redis_histograms() {
        assert_eq!(BUCKET_COUNT, 14);
        assert_eq!(COUNTS_LEN, 1920);
        // Values below 2^16 ns are exact to 512 ns.
        assert_eq!(lowest_equivalent(1_000), 512);
        assert_eq!(highest_equivalent(1_000), 1_023);
        assert_eq!(highest_equivalent(1_000_000_000), 1_002_438_655);
    }

    #[test]
    fn percentiles_and_cdf() {
        let mut h = Histogram::default();
        for _ in 0..99 {
            h.record(2_000);
        }
        h.record(50_000_000);
        assert_eq!(h.total(), 100);
        assert_eq!(h.value_at_percentile(50.0), 2_047);
        assert_eq!(h.value_at_percentile(99.0), 2_047);
        assert!(h.value_at_percentile(99.9) >= 50_000_000);
        assert_eq!(h.value_at_percentile(0.0), 1_536);
        let cdf = h.cdf();
        assert_eq!(cdf.first(), Some(&(2, 99)));
        assert_eq!(cdf.last().map(|&(_, c)| c), Some(100));
    }
}
