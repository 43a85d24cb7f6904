//! The admission plugins built into the API server, as kube-apiserver compiles its own in
//! (the webhooks of the platform's components are registered at start instead), and the
//! server as the [`cluster::Cluster`](::admission::cluster::Cluster) that admission's checks
//! read ([`cluster`]).

pub mod cluster;
pub mod default_storage_class;
