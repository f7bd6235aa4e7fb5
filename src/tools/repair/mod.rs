//! `hozon-repair`'s analysis that is not tied to its command line: the
//! problem and plan types (`model`) and the AOF analysis and plans
//! (`aof`), which the `repair_salvage` fuzz check runs too (docs/repair.md).

pub mod aof;
pub mod model;
