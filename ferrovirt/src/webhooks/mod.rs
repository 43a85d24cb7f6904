//! Admission on a cluster and in-process: the AdmissionReview framing every server uses
//! ([`review`]) and its serving certificate ([`serving`]), CDI's webhook server ([`cdi`]) with
//! its clone authorization, the install operators' guards ([`install_guards`]) served over a
//! kube client ([`install`]) or registered with the embedded API server ([`embedded`]),
//! HCO's webhook ([`hco`]) and CRD conversion reviews.

pub mod cdi;
pub mod clone_auth;
pub mod conversion_review;
pub mod embedded;
pub mod hco;
pub mod install;
pub mod install_guards;
pub mod review;
pub mod serving;
