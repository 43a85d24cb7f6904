//! The import benchmark; being written (see docs/performance.md once it lands).
fn main() {}
