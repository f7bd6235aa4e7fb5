//! Differential tests: protocol.
