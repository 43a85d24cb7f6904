//! The admission plugins built into the API server, as kube-apiserver compiles its own in
//! (the webhooks of the platform's components are registered at start instead).

pub mod default_storage_class;
