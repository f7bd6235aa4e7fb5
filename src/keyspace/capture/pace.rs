//! `rdb-key-save-delay`: a capture slowed to a set pace, so tests (Redis's
//! and ours) can act while a BGSAVE, a rewrite or a replication payload is
//! still being produced (docs/persistence.md).
//!
//! Redis's forked child sleeps after each key it writes. hozon's capture
//! runs in slices on the command thread, which must not sleep, so the pace
//! is kept by the clock instead: key `k` of a capture is emitted no earlier
//! than `k` intervals after the capture began, and the event loop waits
//! (rather than spins) until the next key is due. The setting is read at
//! every slice: lowering it to 0 lets a slowed capture finish at full
//! speed, where Redis's child keeps the value it was forked with.

use std::time::{Duration, Instant};

/// At most this many keys are allowed at once, so a pace continued after a
/// long pause (or a huge count) stays a number, not an overflow.
const MAX_ALLOWANCE: u64 = 1 << 20;

/// The pace of the running capture.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    /// Time per key; zero for no pacing.
    interval: Duration,
    /// When the next key may be emitted.
    next_due: Option<Instant>,
}

impl Pace {
    /// Sets the pace from `rdb-key-save-delay` at `now`: `delay` µs per
    /// key when positive; a negative `-n` (Redis sleeps 1 µs after one key
    /// in `n`, chosen at random) is 1 µs per `n` keys on average; 0 is no
    /// pacing. A changed value paces the keys after `now` afresh.
    pub(crate) fn set_delay(&mut self, delay: i32, now: Instant) {
        let interval = match delay {
            0 => Duration::ZERO,
            d if d > 0 => Duration::from_micros(d as u64),
            d => Duration::from_nanos(1000 / u64::from(d.unsigned_abs())),
        };
        if interval != self.interval {
            self.interval = interval;
            self.next_due = (!interval.is_zero()).then_some(now);
        }
    }

    /// Starts pacing a new capture at `now`.
    pub(crate) fn restart(&mut self, now: Instant) {
        self.next_due = (!self.interval.is_zero()).then_some(now);
    }

    /// How many keys may be emitted at `now` (`usize::MAX`: no pacing).
    pub(crate) fn allowance(&self, now: Instant) -> usize {
        let Some(due) = self.next_due.filter(|_| !self.interval.is_zero()) else {
            return usize::MAX;
        };
        if now < due {
            return 0;
        }
        let late = now.duration_since(due).as_nanos() / self.interval.as_nanos();
        (late as u64 + 1).min(MAX_ALLOWANCE) as usize
    }

    /// Records that `keys` were emitted at `now`: the next key is due
    /// `keys` intervals after the first of them was (a capture held up,
    /// its slices late, catches up to the pace at once).
    pub(crate) fn emitted(&mut self, keys: usize, now: Instant) {
        if self.interval.is_zero() {
            return;
        }
        let due = self.next_due.unwrap_or(now);
        let step = self
            .interval
            .checked_mul(keys.min(u32::MAX as usize) as u32)
            .unwrap_or(Duration::MAX);
        self.next_due = Some(due.checked_add(step).unwrap_or(far_future(now)));
    }

    /// How long until the next key is due, when the capture must wait.
    pub(crate) fn wait(&self, now: Instant) -> Option<Duration> {
        let due = self.next_due.filter(|_| !self.interval.is_zero())?;
        (due > now).then(|| due - now)
    }
}

/// A time no capture reaches (a pace of `i32::MAX` µs times many keys).
fn far_future(now: Instant) -> Instant {
    now + Duration::from_secs(100 * 365 * 24 * 3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_delay_allows_everything() {
        let mut pace = Pace::default();
        let now = Instant::now();
        pace.restart(now);
        assert_eq!(pace.allowance(now), usize::MAX);
        pace.emitted(1000, now);
        assert_eq!(pace.wait(now), None);
    }

    #[test]
    fn a_positive_delay_spaces_keys_by_that_many_microseconds() {
        let mut pace = Pace::default();
        let t0 = Instant::now();
        pace.set_delay(100, t0);
        pace.restart(t0);
        assert_eq!(pace.allowance(t0), 1, "the first key at once");
        pace.emitted(1, t0);
        assert_eq!(pace.allowance(t0 + Duration::from_micros(99)), 0);
        assert_eq!(pace.wait(t0), Some(Duration::from_micros(100)));
        // 1 ms later: ten keys are due.
        let t1 = t0 + Duration::from_micros(1000);
        assert_eq!(pace.allowance(t1), 10);
        pace.emitted(10, t1);
        assert_eq!(pace.wait(t1), Some(Duration::from_micros(100)));
    }

    #[test]
    fn a_late_capture_catches_up_and_a_new_delay_applies_at_once() {
        let mut pace = Pace::default();
        let t0 = Instant::now();
        pace.set_delay(1000, t0);
        pace.restart(t0);
        pace.emitted(1, t0);
        // No slice for 10 ms: the ten keys due meanwhile may go at once.
        let t1 = t0 + Duration::from_millis(10);
        assert_eq!(pace.allowance(t1), 10);
        pace.emitted(10, t1);
        assert_eq!(pace.wait(t1), Some(Duration::from_millis(1)));
        // The huge delay of a test, then a small one: the small one counts
        // from now, not from the key the huge one scheduled.
        pace.set_delay(i32::MAX, t1);
        pace.emitted(1, t1);
        assert!(pace.wait(t1).unwrap() > Duration::from_secs(2000));
        pace.set_delay(100, t1);
        assert_eq!(pace.allowance(t1), 1);
        pace.set_delay(100, t1 + Duration::from_secs(1));
        assert_eq!(
            pace.allowance(t1),
            1,
            "an unchanged delay keeps the schedule"
        );
        pace.set_delay(0, t1);
        assert_eq!(pace.allowance(t1), usize::MAX);
        assert_eq!(pace.wait(t1), None);
    }

    #[test]
    fn the_largest_delay_waits_without_overflowing() {
        let mut pace = Pace::default();
        let t0 = Instant::now();
        pace.set_delay(i32::MAX, t0);
        pace.restart(t0);
        pace.emitted(usize::MAX, t0);
        assert_eq!(pace.allowance(t0 + Duration::from_secs(3600)), 0);
        assert!(pace.wait(t0).unwrap() > Duration::from_secs(3600));
    }

    #[test]
    fn a_negative_delay_is_one_microsecond_per_n_keys() {
        let mut pace = Pace::default();
        let t0 = Instant::now();
        pace.set_delay(-10, t0);
        pace.restart(t0);
        pace.emitted(1, t0);
        assert_eq!(pace.allowance(t0 + Duration::from_micros(1)), 10);
    }
}
