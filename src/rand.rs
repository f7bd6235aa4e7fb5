//! A small, fast pseudo-random generator (xorshift64*).
//!
//! Used for RANDOMKEY, SPOP/SRANDMEMBER, active-expiry sampling and the
//! like: nothing here needs cryptographic quality, and a local generator
//! keeps the hot path free of a dependency and of thread-local lookups.

#[cfg(test)]
pub(crate) mod fairness;

/// xorshift64* generator. Never yields the same stream twice unless built
/// with the same seed (tests use [`Rng::with_seed`] for determinism).
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded from the clock, the process id and an address.
    pub fn new() -> Rng {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let local = 0u8;
        let addr = &local as *const u8 as u64;
        Rng::with_seed(nanos ^ (u64::from(std::process::id()) << 32) ^ addr.rotate_left(17))
    }

    /// A generator with a fixed seed.
    pub fn with_seed(seed: u64) -> Rng {
        // splitmix64 scrambles weak seeds; the state must never be 0.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng { state: z | 1 }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A uniformly distributed number in `0..bound` (`bound` > 0), every
    /// value exactly equally likely.
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0, "Rng::below needs a positive bound");
        // Lemire's multiply-shift: the high word of x * bound. The low word
        // tells whether x is one of the 2^64 mod bound values that would
        // give some results one more chance than others; those are drawn
        // again (the check costs a division only when the low word is
        // below `bound`, which for small bounds almost never happens).
        let mut m = u128::from(self.next_u64()) * u128::from(bound);
        if (m as u64) < bound {
            let threshold = bound.wrapping_neg() % bound;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(bound);
            }
        }
        (m >> 64) as u64
    }

    /// A uniformly distributed index in `0..len` (`len` > 0).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }
}

impl Default for Rng {
    fn default() -> Self {
        Rng::new()
    }
}
