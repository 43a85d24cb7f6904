//! The API's CRDs and examples, one binary: the generated CRDs are current, structural and
//! named as upstream's, upstream-style manifests round-trip and validate, and every kind and
//! version is held path by path against upstream's published schema.

mod crds_current;
mod examples;
mod structural;
mod upstream;
mod versions;
mod vm_vmi_top_level;
