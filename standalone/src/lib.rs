//! Single-machine mode: the embedded Kubernetes-compatible API server (and, as they land,
//! the local node agent and the PV provisioner) behind `ferrovirt up`.

pub mod apiserver;
pub mod control_plane;
pub mod cri_log;
pub mod csi;
pub mod node_agent;
pub mod node_resources;
pub mod pod_files;
pub mod pod_network;
pub mod provisioner;
pub mod secondary_networks;
pub mod service_accounts;
pub mod snapshotter;
