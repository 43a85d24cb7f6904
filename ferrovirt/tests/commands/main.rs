//! The commands on their own, one binary: the CLI (import, the importer pod contract), image-
//! upload against an in-process API server, and the bridge CNI plugin beside the reference one.

mod cli;
mod cni_bridge;
mod image_upload;
