//! The CSI driver over its unix socket, one binary: csi-sanity's groups and the driver's own
//! behaviour.

mod behaviour;
mod common;
mod sanity;
