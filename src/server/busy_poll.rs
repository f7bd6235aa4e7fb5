//! Polling for a short while before the event loop sleeps (`busy-poll-us`).
//!
//! When the loop has answered every request it has, it waits in
//! `epoll_wait`. A thread that sleeps there has to be woken by whoever
//! sends the next request: the sender's `send` pays for the wake-up, and on
//! a virtual machine whose idle cores halt (no halt polling in the guest)
//! the wake-up is an inter-processor interrupt through the hypervisor,
//! tens of microseconds of the client's time for every turn. With many
//! clients each sending one request per round trip (no pipelining), the
//! next request typically comes a few microseconds after the loop ran out
//! of work, so the loop polls without sleeping (`epoll_wait` with a zero
//! timeout) for up to `busy-poll-us` first.
//!
//! Spinning is only worth it when the gaps are short, so the loop spins
//! only while most of its recent waits (3 in 4, an exponential average)
//! ended within the limit, whether it spun or slept through them: an idle
//! server, one with a request now and then, or one client doing one thing
//! at a time (a job queue's round trip) sleeps at once, as without it. On a
//! single core the client needs the core the loop would spin on, so there
//! is no spinning at all.
//!
//! The spin does not give way (`sched_yield`) between polls. A first
//! version did, and lost a fifth of the throughput whenever any other
//! process wanted CPU (a `nice 19` busy loop was enough): each yield handed
//! the core to it for a time slice while requests waited. The spin is
//! short enough that the scheduler's own preemption serves whoever waits
//! for the core.
//!
//! Nor does it spin while the machine has more runnable tasks than cores
//! (the running count of `/proc/loadavg`, looked at every
//! [`CROWD_CHECK_EVERY`] at most): then a spin would take CPU that another
//! process wants (consumers, a build) rather than use a core that would sit
//! idle, and the loop sleeps at once as without polling.

use std::time::{Duration, Instant};

/// How often the loop looks again whether the machine is crowded.
pub(crate) const CROWD_CHECK_EVERY: Duration = Duration::from_millis(10);

/// The share of recent waits (an exponential average, 1/8 per wait) that
/// must have ended within the limit before the loop spins. The gaps of a
/// busy unpipelined workload are nearly all short; a closed loop of one
/// request at a time alternates short and long ones, and spinning there
/// would mostly burn the limit for nothing.
const SPIN_WHEN_SHORT_SHARE: u32 = 3 * SHARE_ONE / 4;
/// Fixed-point 1.0 of the share.
const SHARE_ONE: u32 = 1 << 16;

/// The spin predictor of one event loop.
#[derive(Debug)]
pub(crate) struct BusyPoll {
    /// Share of the recent waits that found events within the limit
    /// (fixed point, [`SHARE_ONE`] = all of them).
    short_share: u32,
    /// The machine's cores (with one there is no spinning at all).
    cores: usize,
    /// Counts the runnable tasks of the machine (None: unknown).
    runnable: fn() -> Option<usize>,
    /// When the last count was taken, and whether it found more runnable
    /// tasks than cores.
    crowded: Option<(Instant, bool)>,
}

impl BusyPoll {
    /// A predictor for a machine with `cores` cores.
    pub(crate) fn new(cores: usize) -> BusyPoll {
        BusyPoll::with_counter(cores, runnable_tasks)
    }

    /// A predictor that counts runnable tasks with `runnable`.
    fn with_counter(cores: usize, runnable: fn() -> Option<usize>) -> BusyPoll {
        BusyPoll {
            short_share: 0,
            cores,
            runnable,
            crowded: None,
        }
    }

    /// How long to poll before sleeping in a wait of at most `timeout`
    /// starting at `now`, with the limit `limit` (`busy-poll-us`).
    pub(crate) fn spin_for(
        &mut self,
        limit: Duration,
        timeout: Duration,
        now: Instant,
    ) -> Duration {
        if self.cores < 2
            || limit.is_zero()
            || self.short_share < SPIN_WHEN_SHORT_SHARE
            || self.crowded(now)
        {
            return Duration::ZERO;
        }
        limit.min(timeout)
    }

    /// Whether the machine has more runnable tasks than cores, as last
    /// counted (again when the count is [`CROWD_CHECK_EVERY`] old). An
    /// unknown count is taken as not crowded.
    fn crowded(&mut self, now: Instant) -> bool {
        if let Some((at, crowded)) = self.crowded {
            if now.saturating_duration_since(at) < CROWD_CHECK_EVERY {
                return crowded;
            }
        }
        let crowded = (self.runnable)().is_some_and(|n| n > self.cores);
        self.crowded = Some((now, crowded));
        crowded
    }

    /// Records how a wait of at most `timeout` ended: after `gap`, with
    /// events or not.
    pub(crate) fn record(
        &mut self,
        limit: Duration,
        timeout: Duration,
        gap: Duration,
        events: bool,
    ) {
        if timeout.is_zero() {
            // A look for events without waiting (input already queued, a
            // background slice): it says nothing about the gaps.
            return;
        }
        let short = events && gap <= limit && !limit.is_zero();
        let target = if short { SHARE_ONE } else { 0 };
        // share += (target - share) / 8, in integers.
        self.short_share = self.short_share - self.short_share / 8 + target / 8;
    }
}

/// The machine's runnable tasks (this one included), from the
/// `running/total` field of `/proc/loadavg`; None where it cannot be read.
fn runnable_tasks() -> Option<usize> {
    parse_running(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// The running count of a `/proc/loadavg` line
/// (`0.52 0.58 0.59 3/467 12345` gives 3).
fn parse_running(loadavg: &str) -> Option<usize> {
    let field = loadavg.split_ascii_whitespace().nth(3)?;
    field.split_once('/')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_micros(50);
    const TICK: Duration = Duration::from_millis(100);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn quiet() -> Option<usize> {
        Some(1)
    }

    fn predictor() -> BusyPoll {
        BusyPoll::with_counter(2, quiet)
    }

    fn spins(p: &mut BusyPoll) -> bool {
        p.spin_for(LIMIT, TICK, Instant::now()) == LIMIT
    }

    #[test]
    fn spins_once_most_gaps_are_short() {
        let mut p = predictor();
        assert!(!spins(&mut p), "no spin before any gap is known");
        let mut waits = 0;
        while !spins(&mut p) {
            p.record(LIMIT, TICK, us(10), true);
            waits += 1;
            assert!(waits < 20, "short gaps must turn spinning on");
        }
        assert!(waits > 1, "one short gap is not enough");
        p.record(LIMIT, TICK, us(50), true);
        assert!(spins(&mut p), "a gap of exactly the limit is short");
        for _ in 0..3 {
            p.record(LIMIT, TICK, us(51), true);
        }
        assert!(!spins(&mut p), "a few long gaps: sleep at once");
    }

    #[test]
    fn alternating_gaps_never_spin() {
        let mut p = predictor();
        for i in 0..1000 {
            let gap = if i % 2 == 0 { us(5) } else { us(200) };
            p.record(LIMIT, TICK, gap, true);
            assert!(!spins(&mut p), "wait {i}");
        }
    }

    #[test]
    fn timeouts_count_as_long_and_zero_timeouts_are_ignored() {
        let mut p = predictor();
        for _ in 0..30 {
            p.record(LIMIT, TICK, us(5), true);
        }
        assert!(spins(&mut p));
        for _ in 0..30 {
            p.record(LIMIT, Duration::ZERO, Duration::ZERO, false);
        }
        assert!(spins(&mut p));
        for _ in 0..3 {
            p.record(LIMIT, us(30), us(30), false);
        }
        assert!(!spins(&mut p));
    }

    #[test]
    fn never_spins_past_the_timeout_or_with_limit_zero_or_one_core() {
        let mut p = predictor();
        for _ in 0..30 {
            p.record(LIMIT, TICK, us(5), true);
        }
        assert_eq!(p.spin_for(LIMIT, us(20), Instant::now()), us(20));
        assert_eq!(
            p.spin_for(Duration::ZERO, TICK, Instant::now()),
            Duration::ZERO
        );
        for _ in 0..30 {
            p.record(Duration::ZERO, TICK, us(0), true);
        }
        assert_eq!(p.spin_for(LIMIT, TICK, Instant::now()), Duration::ZERO);

        let mut single = BusyPoll::with_counter(1, quiet);
        for _ in 0..30 {
            single.record(LIMIT, TICK, us(5), true);
        }
        assert_eq!(single.spin_for(LIMIT, TICK, Instant::now()), Duration::ZERO);
    }

    #[test]
    fn a_crowded_machine_never_spins_and_is_counted_every_10_ms() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static RUNNABLE: AtomicUsize = AtomicUsize::new(3);
        static COUNTS: AtomicUsize = AtomicUsize::new(0);
        fn counter() -> Option<usize> {
            COUNTS.fetch_add(1, Ordering::SeqCst);
            Some(RUNNABLE.load(Ordering::SeqCst))
        }
        let mut p = BusyPoll::with_counter(2, counter);
        for _ in 0..30 {
            p.record(LIMIT, TICK, us(5), true);
        }
        let t0 = Instant::now();
        assert_eq!(
            p.spin_for(LIMIT, TICK, t0),
            Duration::ZERO,
            "3 runnable, 2 cores"
        );
        RUNNABLE.store(2, Ordering::SeqCst);
        let soon = t0 + CROWD_CHECK_EVERY - us(1);
        assert_eq!(
            p.spin_for(LIMIT, TICK, soon),
            Duration::ZERO,
            "not counted again yet"
        );
        assert_eq!(COUNTS.load(Ordering::SeqCst), 1);
        let later = t0 + CROWD_CHECK_EVERY;
        assert_eq!(
            p.spin_for(LIMIT, TICK, later),
            LIMIT,
            "2 runnable: a core is free"
        );
        assert_eq!(COUNTS.load(Ordering::SeqCst), 2);

        // An unknown count does not stop spinning.
        let mut unknown = BusyPoll::with_counter(2, || None);
        for _ in 0..30 {
            unknown.record(LIMIT, TICK, us(5), true);
        }
        assert_eq!(unknown.spin_for(LIMIT, TICK, t0), LIMIT);
    }

    #[test]
    fn the_running_count_is_read_from_loadavg() {
        assert_eq!(parse_running("0.52 0.58 0.59 3/467 12345\n"), Some(3));
        assert_eq!(parse_running("1.00 1.00 1.00 12/2000 1"), Some(12));
        assert_eq!(parse_running("0.52 0.58 0.59"), None);
        assert_eq!(parse_running("0.52 0.58 0.59 x/467 1"), None);
        assert_eq!(parse_running(""), None);
        if cfg!(target_os = "linux") {
            assert!(
                runnable_tasks().is_some_and(|n| n >= 1),
                "this test is running"
            );
        }
    }
}
