//! Shared by the differential tests and the benchmark.

#![allow(dead_code)]

pub mod corpus;
pub mod oracle;
