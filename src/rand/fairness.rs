//! Test support for the fairness checks of random sampling: Pearson's
//! chi-square statistic against a uniform distribution, the limits Redis's
//! own test suite uses, and reproducible seeds.
//!
//! A randomised test takes its seed from [`seed`]: `HOZON_SEED` when
//! set, otherwise a fresh one. The returned guard prints the seed (and how
//! to rerun with it) if the test fails.

use super::Rng;

/// The environment variable that fixes the seed of the randomised tests.
pub const SEED_VAR: &str = "HOZON_SEED";

/// A test's seed; prints it when dropped during a panic (a failed test).
pub struct Seed {
    /// The seed.
    pub value: u64,
    test: &'static str,
}

impl Seed {
    /// A generator seeded with this seed (`offset` derives independent
    /// streams for several generators in one test).
    pub fn rng(&self, offset: u64) -> Rng {
        Rng::with_seed(self.value.wrapping_add(offset))
    }
}

impl Drop for Seed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "{}: seed {} (rerun with {SEED_VAR}={} cargo test --lib {})",
                self.test, self.value, self.value, self.test
            );
        }
    }
}

/// The seed for `test`: `HOZON_SEED` when set, otherwise random.
pub fn seed(test: &'static str) -> Seed {
    let value = match std::env::var(SEED_VAR) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_VAR} must be a u64, got {v:?}")),
        Err(_) => Rng::new().next_u64(),
    };
    Seed { value, test }
}

/// Pearson's chi-square statistic of `counts` against the uniform
/// distribution over `counts.len()` outcomes (Redis's `chi_square_value`,
/// except that outcomes never drawn count too).
pub fn chi_square(counts: &[u64]) -> f64 {
    let total: u64 = counts.iter().sum();
    let expected = total as f64 / counts.len() as f64;
    counts
        .iter()
        .map(|&c| {
            let d = c as f64 - expected;
            d * d / expected
        })
        .sum()
}

/// The value a chi-square statistic with `df` degrees of freedom exceeds
/// with probability 1e-5 under the uniform distribution (Wilson-Hilferty),
/// rounded down: 40 for df = 9 and 73 for df = 29, the limits Redis's test
/// suite uses.
pub fn chi_square_limit(df: usize) -> f64 {
    // The standard normal quantile of 1 - 1e-5.
    const Z: f64 = 4.264_891;
    let k = df as f64;
    let a = 2.0 / (9.0 * k);
    (k * (1.0 - a + Z * a.sqrt()).powi(3)).floor()
}

/// Panics unless `counts` (how often each of the outcomes came up) pass
/// the chi-square test at [`chi_square_limit`]; returns the statistic.
pub fn assert_uniform(what: &str, counts: &[u64]) -> f64 {
    assert!(counts.len() >= 2, "{what}: at least two outcomes");
    let chi = chi_square(counts);
    let limit = chi_square_limit(counts.len() - 1);
    if chi >= limit {
        let shown = if counts.len() <= 30 {
            format!("counts {counts:?}")
        } else {
            let min = counts.iter().min().copied().unwrap_or(0);
            let max = counts.iter().max().copied().unwrap_or(0);
            format!("counts from {min} to {max}")
        };
        panic!(
            "{what}: chi-square {chi:.1} >= {limit} (df {}), {shown}",
            counts.len() - 1
        );
    }
    chi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_redis_suite_limits() {
        assert_eq!(chi_square_limit(9), 40.0);
        assert_eq!(chi_square_limit(29), 73.0);
        // Grows like df for many outcomes.
        let l = chi_square_limit(999);
        assert!((1150.0..1250.0).contains(&l), "{l}");
    }

    #[test]
    fn chi_square_of_known_counts() {
        assert_eq!(chi_square(&[100, 100, 100]), 0.0);
        // (50² + 50²) / 100
        assert_eq!(chi_square(&[150, 50]), 50.0);
    }

    #[test]
    fn below_is_exact_for_huge_bounds() {
        // 2^64 / (3 * 2^62) = 4/3: plain multiply-shift gives every third
        // result two inputs and the others one, so the results' residues
        // mod 3 would come out about 2:1:1.
        let seed = seed("rand::fairness::tests::below_is_exact_for_huge_bounds");
        let mut rng = seed.rng(0);
        let mut counts = [0u64; 3];
        for _ in 0..30_000 {
            counts[(rng.below(3 << 62) % 3) as usize] += 1;
        }
        assert_uniform("Rng::below(3 * 2^62) mod 3", &counts);
    }

    #[test]
    fn the_generator_itself_passes() {
        let seed = seed("rand::fairness::tests::the_generator_itself_passes");
        let mut rng = seed.rng(0);
        let mut counts = [0u64; 10];
        for _ in 0..100_000 {
            counts[rng.index(10)] += 1;
        }
        assert_uniform("Rng::index(10)", &counts);
    }
}
