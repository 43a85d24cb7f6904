//! Storage and data import: the CSI hostpath driver and a pool's mounter, CDI's controllers,
//! `ferrovirt import`, and the pods that fill volumes (the importer, the source of a
//! host-assisted clone).

pub mod cdi_controller;
pub mod clone_source;
pub mod csi_driver;
pub mod import;
pub mod importer_pod;
pub mod pool_mounter;
