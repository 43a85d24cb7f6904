//! Operators of operators: each reads its top-level custom resource and deploys what it names.

pub mod cnao;
