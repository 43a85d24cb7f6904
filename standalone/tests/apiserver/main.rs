//! Real clients against the embedded API server: kubectl, kube-rs (Api, watcher,
//! Controller), Python's kubernetes package, and a restart on the same data directory.

mod common;
mod kube_client;
mod kubectl;
mod python;
mod restart;
