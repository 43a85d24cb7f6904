//! The upload path end to end, one binary: tokens and the proxy's checks, uploads, resumes,
//! failures, vanishing clients, and the fuzzers' regression inputs.

mod auth;
mod common;
mod failures;
mod fuzz_regressions;
mod resume;
mod upload;
mod vanishing_client;
