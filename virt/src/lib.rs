//! The VM side of a node: a VirtualMachineInstance becomes a QEMU process driven over QMP,
//! with no libvirt.
//!
//! - [`domain`]: the VMI and the node's facts to a QEMU invocation (pure, golden-tested);
//! - [`qmp`]: typed QMP commands and events;
//! - [`launcher`]: the process that owns QEMU, its control socket and shutdown policy;
//! - [`cloudinit`], [`iso`]: cloud-init and config-volume ISOs;
//! - [`guest_agent`]: the qemu guest agent client;
//! - [`container_disk`]: the node cache of containerDisks;
//! - [`accel`]: whether KVM really runs guests here.

pub mod accel;
pub mod cloudinit;
pub mod container_disk;
pub mod domain;
pub mod guest_agent;
pub mod handler;
pub mod iso;
pub mod launcher;
pub mod qmp;
pub mod subresources;
pub mod unix_path;
