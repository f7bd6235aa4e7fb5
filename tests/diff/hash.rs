//! Differential tests: hash.
