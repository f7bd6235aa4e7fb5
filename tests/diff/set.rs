//! Differential tests: set.
