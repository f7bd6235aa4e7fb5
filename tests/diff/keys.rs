//! Differential tests: keys.
