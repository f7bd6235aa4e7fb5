//! Soak test with faults: a mixed workload over every type with many
//! clients, background saves and rewrites, SIGKILL and restart, checked
//! against a model of the acknowledged writes.
