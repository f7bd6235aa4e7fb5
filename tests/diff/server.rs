//! Differential tests: server.
