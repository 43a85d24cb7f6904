//! The API's CRDs and examples, one binary: the generated CRDs are current, structural and
//! named as upstream's, and upstream-style manifests round-trip and validate.

mod crds_current;
mod examples;
mod structural;
