//! Admission served: the decisions are the `admission` crate's; here are the servers that
//! carry them. The AdmissionReview over HTTP every server uses ([`review`]) and its serving
//! certificate ([`serving`]), CDI's webhook server ([`cdi`]) with its clone tokens
//! ([`clone_auth`]), the install operators' guards served over a kube client ([`install`])
//! or registered with the embedded API server ([`embedded`]), HCO's webhook ([`hco`]) and
//! the HCO operator's rendering of operands its checks read ([`hco_operands`]), and CDI's
//! rendering of labeled claims from their StorageProfile ([`pvc_mutate`]).

pub mod cdi;
pub mod clone_auth;
pub mod embedded;
pub mod hco;
pub mod hco_operands;
pub mod install;
pub mod pvc_mutate;
pub mod review;
pub mod serving;
