//! Differential tests: list.
