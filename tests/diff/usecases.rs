//! Differential tests: usecases.
