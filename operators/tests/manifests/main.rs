//! The operators' manifests, one binary: generated ones are current, RBAC covers every call the
//! controllers make, and Pod Security labels where workloads need them.

mod deploy;
mod hco_bundle_current;
mod pod_security;
