//! Differential tests: zset.
