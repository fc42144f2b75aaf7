//! entitlements' behaviour, read against documents 2 and 3 and SEMANTICS.md section 3.

// Test code: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod catalog;
mod properties;
mod purchases;
mod quotas;
