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

use std::time::Duration;

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
    /// Whether spinning can help at all (more than one core).
    enabled: bool,
    /// Share of the recent waits that found events within the limit
    /// (fixed point, [`SHARE_ONE`] = all of them).
    short_share: u32,
}

impl BusyPoll {
    /// A predictor for a machine with `cores` cores.
    pub(crate) fn new(cores: usize) -> BusyPoll {
        BusyPoll {
            enabled: cores > 1,
            short_share: 0,
        }
    }

    /// How long to poll before sleeping in a wait of at most `timeout`,
    /// with the limit `limit` (`busy-poll-us`).
    pub(crate) fn spin_for(&self, limit: Duration, timeout: Duration) -> Duration {
        if !self.enabled || self.short_share < SPIN_WHEN_SHORT_SHARE {
            return Duration::ZERO;
        }
        limit.min(timeout)
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

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_micros(50);
    const TICK: Duration = Duration::from_millis(100);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn spins(p: &BusyPoll) -> bool {
        p.spin_for(LIMIT, TICK) == LIMIT
    }

    #[test]
    fn spins_once_most_gaps_are_short() {
        let mut p = BusyPoll::new(2);
        assert!(!spins(&p), "no spin before any gap is known");
        let mut waits = 0;
        while !spins(&p) {
            p.record(LIMIT, TICK, us(10), true);
            waits += 1;
            assert!(waits < 20, "short gaps must turn spinning on");
        }
        assert!(waits > 1, "one short gap is not enough");
        p.record(LIMIT, TICK, us(50), true);
        assert!(spins(&p), "a gap of exactly the limit is short");
        for _ in 0..3 {
            p.record(LIMIT, TICK, us(51), true);
        }
        assert!(!spins(&p), "a few long gaps: sleep at once");
    }

    #[test]
    fn alternating_gaps_never_spin() {
        let mut p = BusyPoll::new(2);
        for i in 0..1000 {
            let gap = if i % 2 == 0 { us(5) } else { us(200) };
            p.record(LIMIT, TICK, gap, true);
            assert!(!spins(&p), "wait {i}");
        }
    }

    #[test]
    fn timeouts_count_as_long_and_zero_timeouts_are_ignored() {
        let mut p = BusyPoll::new(2);
        for _ in 0..30 {
            p.record(LIMIT, TICK, us(5), true);
        }
        assert!(spins(&p));
        for _ in 0..30 {
            p.record(LIMIT, Duration::ZERO, Duration::ZERO, false);
        }
        assert!(spins(&p));
        for _ in 0..3 {
            p.record(LIMIT, us(30), us(30), false);
        }
        assert!(!spins(&p));
    }

    #[test]
    fn never_spins_past_the_timeout_or_with_limit_zero_or_one_core() {
        let mut p = BusyPoll::new(2);
        for _ in 0..30 {
            p.record(LIMIT, TICK, us(5), true);
        }
        assert_eq!(p.spin_for(LIMIT, us(20)), us(20));
        assert_eq!(p.spin_for(Duration::ZERO, TICK), Duration::ZERO);
        for _ in 0..30 {
            p.record(Duration::ZERO, TICK, us(0), true);
        }
        assert_eq!(p.spin_for(LIMIT, TICK), Duration::ZERO);

        let mut single = BusyPoll::new(1);
        for _ in 0..30 {
            single.record(LIMIT, TICK, us(5), true);
        }
        assert_eq!(single.spin_for(LIMIT, TICK), Duration::ZERO);
    }
}
