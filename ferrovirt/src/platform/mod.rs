//! The single-machine platform: `ferrovirt up` and `down` (the embedded API server and
//! everything it runs in-process), with the operators that run inside it there (the
//! HostPathProvisioner's and SSP's).

pub mod hpp;
pub mod ssp;
pub mod up;
