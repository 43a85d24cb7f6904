//! Admission: one chain of plugins, run in kube-apiserver's order. On a create or an update
//! of an object (not of its status) every mutating plugin runs in the order registered, then
//! the object is checked against its schema, then every validating plugin judges the
//! result; on a delete the validating plugins judge the stored object. The first refusal
//! ends the request. Conversion between versions is not admission (see `converter`), nor are
//! the virtual resources a function answers (`VirtualCreate`).
//!
//! Built in, ahead of the rest as kube-apiserver orders its compiled-in plugins before its
//! webhooks: DefaultStorageClass and Priority. Registered: the platform's webhooks, run in-process
//! (`ApiServerConfig::admission` at start, `ApiServer::register_admission` later). The
//! checks admission's crate writes once for both homes read the server as their
//! [`Cluster`](::admission::cluster::Cluster) ([`cluster`]).

mod chain;
pub mod cluster;
pub mod default_storage_class;
mod plugin;
mod priority;
mod request;

pub use chain::AdmissionChain;
pub use plugin::{AdmissionPlugin, Hook, Mutate, Refusal, Resources, Validate, Wording};
pub(crate) use request::DRY_RUN;
pub use request::{AdmissionRequest, Operation, Origin, Server, Write};

#[cfg(test)]
mod tests;
