//! Differential tests: strings.
