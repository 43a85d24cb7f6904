//! The HostPath Provisioner's admission: its webhook's validation of the
//! HostPathProvisioner.

pub mod validate;
