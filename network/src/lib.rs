//! Node networking for VMs, as the cluster-network-addons-operator deploys it: the
//! linux-bridge CNI plugin (`cni`) and the bridge marker (`bridge_marker`), which reports a
//! node's Linux bridges as node resources.

pub mod bridge_marker;
pub mod cni;
