//! The install operators on a cluster, one process each (CDI's, the HostPathProvisioner's,
//! HCO, SSP's, the network addons' and KubeVirt's), over the `operators` crate's
//! reconcilers, and HCO's CLI download server. (Named so as not to shadow that crate.)

pub mod cdi;
pub mod cli_download;
pub mod hco;
pub mod hpp;
pub mod kubevirt;
pub mod network;
pub mod ssp;
