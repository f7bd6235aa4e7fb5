//! The clock the per-command statistics read twice per command: the
//! CPU's time-stamp counter where it is invariant (x86_64 with
//! `constant_tsc` and `nonstop_tsc`), calibrated once against `Instant`;
//! `Instant` elsewhere. Redis does the same (its `MONOTONIC_CLOCK_HW`).
//! On the 2-core VM a pair of readings costs about 25 ns this way against
//! 60-75 ns for two `Instant::now()`.
//!
//! [`WallClock`] turns a reading into Unix milliseconds, so a command's
//! first reading also gives the time its expiries are judged by: the
//! system clock (`clock_gettime`, which reads the time-stamp counter
//! itself) is asked only every [`WallClock::REFRESH_NS`].

use std::sync::OnceLock;
use std::time::Instant;

/// A reading of the clock.
#[derive(Debug, Clone, Copy)]
pub struct Stamp(u64);

/// How readings become nanoseconds.
enum Source {
    /// Time-stamp counter ticks, this many nanoseconds each.
    Tsc(f64),
    /// Nanoseconds since this instant.
    Instant(Instant),
}

fn source() -> &'static Source {
    static SOURCE: OnceLock<Source> = OnceLock::new();
    SOURCE.get_or_init(|| calibrated_tsc().unwrap_or_else(|| Source::Instant(Instant::now())))
}

#[cfg(target_arch = "x86_64")]
fn calibrated_tsc() -> Option<Source> {
    let flags = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let has = |flag: &str| flags.split_whitespace().any(|w| w == flag);
    if !has("constant_tsc") || !has("nonstop_tsc") {
        return None;
    }
    let started = Instant::now();
    // SAFETY: RDTSC has no preconditions on x86_64.
    let first = unsafe { core::arch::x86_64::_rdtsc() };
    while started.elapsed().as_micros() < 2000 {
        std::hint::spin_loop();
    }
    let nanos = started.elapsed().as_nanos() as f64;
    // SAFETY: as above.
    let ticks = unsafe { core::arch::x86_64::_rdtsc() }.wrapping_sub(first);
    (ticks > 0).then(|| Source::Tsc(nanos / ticks as f64))
}

#[cfg(not(target_arch = "x86_64"))]
fn calibrated_tsc() -> Option<Source> {
    None
}

/// Reads the clock.
#[inline]
pub fn now() -> Stamp {
    match source() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: RDTSC has no preconditions on x86_64.
        Source::Tsc(_) => Stamp(unsafe { core::arch::x86_64::_rdtsc() }),
        #[cfg(not(target_arch = "x86_64"))]
        Source::Tsc(_) => Stamp(0),
        Source::Instant(base) => Stamp(base.elapsed().as_nanos() as u64),
    }
}

/// Nanoseconds since `start`.
#[inline]
pub fn nanos_since(start: Stamp) -> u64 {
    nanos_between(start, now())
}

/// Nanoseconds from `start` to `end`; 0 when `end` is not later.
#[inline]
fn nanos_between(start: Stamp, end: Stamp) -> u64 {
    match source() {
        Source::Tsc(ns_per_tick) => match end.0.checked_sub(start.0) {
            Some(ticks) => (ticks as f64 * ns_per_tick) as u64,
            None => 0,
        },
        Source::Instant(_) => end.0.saturating_sub(start.0),
    }
}

/// The system clock in Unix nanoseconds.
fn system_unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Unix time from the clock's readings: an anchor (a reading and the
/// system clock's time at it) and the time elapsed since, by the
/// reading. The anchor is taken again from the system clock once
/// [`WallClock::REFRESH_NS`] have passed, so a change of the system
/// clock (NTP, an operator) shows within that; between anchors the time
/// never goes backwards, and a new anchor within a millisecond of the
/// time carried forward does not take it back either.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    anchor: Stamp,
    unix_ns: i64,
}

impl Default for WallClock {
    fn default() -> Self {
        WallClock {
            anchor: now(),
            unix_ns: system_unix_ns(),
        }
    }
}

impl WallClock {
    /// How long an anchor serves (10 ms).
    pub const REFRESH_NS: u64 = 10_000_000;

    /// Unix milliseconds at the reading `at` (a fresh one: [`now`]).
    pub fn unix_ms(&mut self, at: Stamp) -> i64 {
        let since = nanos_between(self.anchor, at);
        let carried = self.unix_ns + since as i64;
        if since >= Self::REFRESH_NS || at.0 < self.anchor.0 {
            let system = system_unix_ns();
            // The system clock a little behind the carried time (the
            // counter's calibration) is not a step back; far from it is
            // the clock set anew, which is followed.
            self.unix_ns = if (carried - 1_000_000..carried).contains(&system) {
                carried
            } else {
                system
            };
            self.anchor = at;
            return self.unix_ns.div_euclid(1_000_000);
        }
        carried.div_euclid(1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wall_clock_follows_the_system_clock() {
        let mut wall = WallClock::default();
        for _ in 0..50 {
            let before = system_unix_ns() / 1_000_000;
            let ms = wall.unix_ms(now());
            let after = system_unix_ns() / 1_000_000;
            // Within the calibration's error of the system clock (a
            // millisecond either side at most), never backwards.
            assert!(
                (before - 1..=after + 1).contains(&ms),
                "{before} {ms} {after}"
            );
            std::thread::sleep(std::time::Duration::from_micros(700));
        }
    }

    #[test]
    fn the_wall_clock_never_steps_back_and_follows_a_set_clock() {
        let mut wall = WallClock::default();
        let mut last = wall.unix_ms(now());
        for _ in 0..2000 {
            let ms = wall.unix_ms(now());
            assert!(ms >= last, "{ms} after {last}");
            last = ms;
        }
        // The system clock "set" an hour back: followed at the next anchor.
        wall.unix_ns -= 3_600_000_000_000;
        std::thread::sleep(std::time::Duration::from_millis(11));
        let ms = wall.unix_ms(now());
        assert!((ms - system_unix_ns() / 1_000_000).abs() <= 1, "{ms}");
    }

    #[test]
    fn measures_a_sleep() {
        let start = super::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let nanos = super::nanos_since(start);
        assert!((19_000_000..2_000_000_000).contains(&nanos), "{nanos}");
    }
}
