//! The importer's end-to-end tests, one binary: local files, HTTP, registries, S3, faults, and
//! the fuzzers' regression inputs.

mod faults;
mod fuzz_regressions;
mod import_file;
mod import_http;
mod import_registry;
mod import_s3;
