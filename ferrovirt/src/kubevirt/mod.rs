//! KubeVirt's components as `ferrovirt` subcommands: virt-api, virt-controller, virt-handler,
//! virt-launcher, the certificates virt-api and virt-handler share, and `vmi run` (one VMI on
//! this machine without a platform). The VM machinery itself is the `virt` crate.

pub mod certs;
pub mod virt_api;
pub mod virt_controller;
pub mod virt_handler;
pub mod virt_launcher;
pub mod vmi_run;
