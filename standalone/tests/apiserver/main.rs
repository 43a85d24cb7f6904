//! Real clients against the embedded API server: kubectl, kube-rs (Api, watcher,
//! Controller), Python's kubernetes package, a restart on the same data directory, and
//! aggregated APIs proxied as kube-aggregator does.

mod aggregated;
mod common;
mod examples;
mod kube_client;
mod kubectl;
mod python;
mod restart;
mod versions;
