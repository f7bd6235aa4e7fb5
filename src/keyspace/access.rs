//! The 24-bit access field every key carries ([`crate::types::Blob::access`]
//! of the key in a database's main table) and Redis's arithmetic on it
//! (evict.c, object.c): under an LRU (or no) policy it is the LRU clock of
//! the last access, in seconds modulo 2^24; under an LFU policy the high 16
//! bits are the last decrement time in minutes modulo 2^16 and the low 8 bits
//! a logarithmic access counter. See docs/memory.md.

/// The largest LRU clock (`LRU_CLOCK_MAX`, 24 bits).
pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;
/// Milliseconds per LRU clock tick (`LRU_CLOCK_RESOLUTION`).
pub const LRU_CLOCK_RESOLUTION: i64 = 1000;
/// The counter of a new key under LFU (`LFU_INIT_VAL`).
pub const LFU_INIT_VAL: u32 = 5;

/// The LRU clock at `now_ms` (Redis's `getLRUClock`).
pub fn lru_clock(now_ms: i64) -> u32 {
    ((now_ms / LRU_CLOCK_RESOLUTION) as u64 & u64::from(LRU_CLOCK_MAX)) as u32
}

/// Milliseconds since the access recorded as `stored`, with the clock at
/// `clock` (Redis's `estimateObjectIdleTime`: a clock that wrapped once).
pub fn idle_ms(clock: u32, stored: u32) -> u64 {
    let stored = stored & LRU_CLOCK_MAX;
    let ticks = if clock >= stored {
        clock - stored
    } else {
        clock + (LRU_CLOCK_MAX - stored)
    };
    u64::from(ticks) * LRU_CLOCK_RESOLUTION as u64
}

/// The LFU clock at `now_ms`: minutes modulo 2^16 (`LFUGetTimeInMinutes`).
pub fn lfu_minutes(now_ms: i64) -> u32 {
    ((now_ms / 1000 / 60) as u64 & 0xffff) as u32
}

/// The access field of a new key: the LRU clock, or under LFU the time in
/// minutes with the initial counter.
pub fn initial(lfu: bool, now_ms: i64) -> u32 {
    if lfu {
        (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL
    } else {
        lru_clock(now_ms)
    }
}

/// Minutes since `ldt` with the LFU clock at `now` (wrapping once).
fn lfu_elapsed(now: u32, ldt: u32) -> u32 {
    if now >= ldt {
        now - ldt
    } else {
        65535 - ldt + now
    }
}

/// The counter of `stored` after the decay due at `now_minutes`, one per
/// `decay_time` minutes (`LFUDecrAndReturn`); the field itself unchanged.
pub fn lfu_decayed(stored: u32, now_minutes: u32, decay_time: u64) -> u32 {
    let ldt = (stored >> 8) & 0xffff;
    let counter = stored & 0xff;
    // No decay with a decay time of 0.
    let periods = u64::from(lfu_elapsed(now_minutes, ldt))
        .checked_div(decay_time)
        .unwrap_or(0);
    if periods == 0 {
        counter
    } else if periods > u64::from(counter) {
        0
    } else {
        counter - periods as u32
    }
}

/// The counter after one access (`LFULogIncr`): incremented with
/// probability 1 / ((counter - 5) * log_factor + 1), saturating at 255;
/// `r` is a uniform random number in [0, 1].
pub fn lfu_log_incr(counter: u32, log_factor: u64, r: f64) -> u32 {
    if counter >= 255 {
        return 255;
    }
    let base = f64::from(counter.saturating_sub(LFU_INIT_VAL));
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    if r < p {
        counter + 1
    } else {
        counter
    }
}

/// The field after an access under LFU (`updateLFU`): decayed, then
/// incremented, stamped with the current minutes.
pub fn lfu_touched(stored: u32, now_minutes: u32, decay_time: u64, log_factor: u64, r: f64) -> u32 {
    let counter = lfu_decayed(stored, now_minutes, decay_time);
    let counter = lfu_log_incr(counter, log_factor, r);
    (now_minutes << 8) | counter
}

/// The field RESTORE FREQ or an RDB FREQ record sets (counter `freq`, the
/// current minutes).
pub fn lfu_with_freq(freq: u8, now_ms: i64) -> u32 {
    (lfu_minutes(now_ms) << 8) | u32::from(freq)
}

/// The field RESTORE IDLETIME or an RDB IDLE record sets: the clock as it
/// was `idle_secs` ago (Redis's `objectSetLRUOrLFU`: an idle time longer
/// than the clock gives a time half-way round, evicted first).
pub fn lru_with_idle(idle_secs: u64, now_ms: i64) -> u32 {
    let clock = i64::from(lru_clock(now_ms));
    let idle = (idle_secs.min(i64::MAX as u64 / 1000) as i64) * 1000 / LRU_CLOCK_RESOLUTION;
    let abs = clock - idle;
    if abs < 0 {
        ((clock + i64::from(LRU_CLOCK_MAX / 2)) % i64::from(LRU_CLOCK_MAX)) as u32
    } else {
        abs as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_time_counts_whole_seconds_across_the_wrap() {
        assert_eq!(idle_ms(100, 90), 10_000);
        assert_eq!(idle_ms(5, LRU_CLOCK_MAX - 5), 10_000);
        let now = 1_700_000_123_456;
        assert_eq!(idle_ms(lru_clock(now), lru_with_idle(42, now)), 42_000);
    }

    #[test]
    fn lfu_counter_decays_per_period_and_grows_logarithmically() {
        let stored = (100 << 8) | 20;
        assert_eq!(lfu_decayed(stored, 100, 1), 20);
        assert_eq!(lfu_decayed(stored, 103, 1), 17);
        assert_eq!(lfu_decayed(stored, 160, 1), 0);
        assert_eq!(lfu_decayed(stored, 110, 0), 20);
        assert_eq!(lfu_log_incr(5, 10, 0.99), 6);
        assert_eq!(lfu_log_incr(15, 10, 0.5), 15);
        assert_eq!(lfu_log_incr(15, 10, 0.005), 16);
        assert_eq!(lfu_log_incr(255, 0, 0.0), 255);
        assert_eq!(lfu_touched(stored, 103, 1, 10, 0.99) & 0xff, 17);
        assert_eq!(lfu_touched(stored, 103, 1, 10, 0.99) >> 8, 103);
    }
}
