//! Admission: every decision a webhook makes on a request, as functions of the request's
//! objects (and, where a check reads other objects, of a [`cluster::Cluster`] it asks).
//! CDI's and virt-api's defaulting and validation ([`admit`], [`cdi`], [`kubevirt`],
//! [`hostpath`]), CDI's clone authorization, HCO's checks ([`hco`]), the install operators'
//! guards ([`install_guards`]), SSP's template validator ([`ssp`]) and the part of Tekton's
//! webhook that `ferrovirt up` needs ([`tekton`]); one refusal
//! ([`Refusal`]) and one framing of an AdmissionReview ([`review`]) and of a ConversionReview
//! ([`conversion_review`]). The embedded API server calls them in-process; the webhook
//! servers of the `ferrovirt` binary serve them on a cluster. Neither HTTP nor a client is
//! here.

pub mod cdi;
pub mod cluster;
pub mod conversion_review;
pub mod hco;
pub mod hostpath;
pub mod install_guards;
pub mod instancetype;
pub mod kinds;
pub mod kubevirt;
pub mod refusal;
pub mod review;
pub mod ssp;
pub mod tekton;

pub use kinds::{AdmissionError, admit, admit_in};
pub use refusal::Refusal;
