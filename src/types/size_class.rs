//! The block an allocator hands out for a request of `n` bytes, for
//! memory accounting: jemalloc's size classes (the server's allocator by
//! default, and Redis's: `MEMORY USAGE`, the inspector's estimates) and
//! glibc malloc's chunks (the server built without the `jemalloc`
//! feature). docs/memory.md explains how `used_memory` uses them.

/// jemalloc's size class for a request of `n` bytes (what its
/// `malloc_usable_size` returns): 8, 16, then 16-byte steps to 128, then
/// four classes per doubling (160, 192, 224, 256, 320, ...). Large
/// classes follow the same spacing, which is whole pages from 16 KiB on.
#[inline]
pub fn jemalloc(n: usize) -> usize {
    if n <= 8 {
        return 8;
    }
    if n <= 128 {
        return n.div_ceil(16) * 16;
    }
    // A quarter of the power of two below n.
    let step = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros() - 2);
    n.div_ceil(step) * step
}

/// The jemalloc class a growing buffer of `current` bytes moves to when it
/// must hold `needed`: a quarter more at least (amortized O(1) growth),
/// rounded up to the size class (the block is that size anyway), and not
/// past `max` unless `needed` is more. Doubling instead left small buffers
/// up to half empty (issue 31's memory figures). Lists' chunks and the
/// sorted sets' tree nodes grow by it.
#[inline]
pub fn grown(current: usize, needed: usize, max: usize) -> usize {
    let want = needed.max(current + current / 4);
    jemalloc(want).min(max.max(needed))
}

/// The memory glibc's malloc uses for a request of `n` bytes: the chunk
/// (8-byte header, rounded up to 16, 32 at least), or for a large request
/// served by mmap (128 KiB and up by default) the pages.
#[inline]
pub fn glibc(n: usize) -> usize {
    if n >= 128 * 1024 {
        (n + 16 + 4095) & !4095
    } else {
        ((n + 8 + 15) & !15).max(32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_classes_are_its_table() {
        // jemalloc 5.3's small classes (LG_QUANTUM 4, 4 per doubling).
        let table = [
            8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768,
            896, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192,
            10240, 12288, 14336, 16384, 20480,
        ];
        let mut class = 0;
        for n in 1..=20480 {
            while table[class] < n {
                class += 1;
            }
            assert_eq!(jemalloc(n), table[class], "request of {n}");
        }
        assert_eq!(jemalloc(1 << 20), 1 << 20);
        assert_eq!(jemalloc((1 << 20) + 1), (1 << 20) + (1 << 18));
    }

    #[test]
    fn growth_is_a_quarter_at_least_to_the_class_within_the_limit() {
        assert_eq!(grown(0, 5, 8192), 8);
        assert_eq!(grown(100, 101, 8192), 128);
        assert_eq!(grown(128, 129, 8192), 160);
        assert_eq!(grown(1024, 1025, 8192), 1280);
        assert_eq!(grown(8000, 8001, 8192), 8192);
        assert_eq!(grown(8192, 9000, 8192), 9000);
        for current in 1..5000 {
            let g = grown(current, current + 1, usize::MAX);
            assert!(
                g >= current + current / 4 && g == jemalloc(g),
                "{current} -> {g}"
            );
        }
    }

    #[test]
    fn glibc_chunks() {
        assert_eq!(glibc(1), 32);
        assert_eq!(glibc(24), 32);
        assert_eq!(glibc(25), 48);
        assert_eq!(glibc(64), 80);
        assert_eq!(glibc(128 * 1024), 128 * 1024 + 4096);
    }
}
