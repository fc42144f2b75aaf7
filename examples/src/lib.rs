//! Examples live beside this crate: run `cargo run -p examples --example NAME`.
