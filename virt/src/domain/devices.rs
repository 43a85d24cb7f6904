//! The devices besides disks and NICs: serial console, VNC display, rng, tablet,
//! watchdog, memory balloon, the guest agent channel, and QMP.

use api::kubevirt::VirtualMachineInstanceSpec;
use api::validation::FieldPath;
use serde_json::{Value, json};

use super::facts::NodeFacts;
use super::{DomainError, DomainSockets};

/// The name the guest agent's virtio-serial port must have.
pub const GUEST_AGENT_CHANNEL: &str = "org.qemu.guest_agent.0";

/// The devices part of the invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct DevicesPlan {
    pub sockets: DomainSockets,
    pub rng: bool,
    /// Tablets as (device JSON), with whether a USB controller is needed.
    pub inputs: Vec<Value>,
    pub usb: bool,
    /// The watchdog device and QEMU's `-action watchdog=` value.
    pub watchdog: Option<(Value, &'static str)>,
    pub balloon: bool,
}

pub fn plan(
    spec: &VirtualMachineInstanceSpec,
    facts: &NodeFacts,
) -> Result<DevicesPlan, DomainError> {
    let d = &spec.domain.devices;
    let path = FieldPath::new("spec").child("domain").child("devices");
    let run = &facts.socket_dir;
    let mut inputs = Vec::new();
    let mut usb = false;
    for (i, input) in d.inputs.iter().flatten().enumerate() {
        let ipath = path.child("inputs").index(i);
        if input.type_ != "tablet" {
            return Err(DomainError::unsupported(
                &ipath.child("type"),
                format!(
                    "unsupported input type {:?}; supported: tablet",
                    input.type_
                ),
            ));
        }
        let driver = match input.bus.as_deref().unwrap_or("usb") {
            "usb" => {
                usb = true;
                "usb-tablet"
            }
            "virtio" => "virtio-tablet-pci",
            other => {
                return Err(DomainError::unsupported(
                    &ipath.child("bus"),
                    format!("unsupported input bus {other:?}; supported: usb, virtio"),
                ));
            }
        };
        let mut device = json!({"driver": driver, "id": format!("ua-{}", input.name)});
        if driver == "usb-tablet" {
            device["bus"] = json!("usb.0");
        }
        inputs.push(device);
    }
    let watchdog = match &d.watchdog {
        None => None,
        Some(w) => {
            let wpath = path.child("watchdog");
            let Some(esb) = &w.i6300esb else {
                return Err(DomainError::unsupported(
                    &wpath,
                    format!(
                        "watchdog {} can't be mapped, no watchdog type specified",
                        w.name
                    ),
                ));
            };
            let action = match esb.action.as_deref().unwrap_or("reset") {
                "reset" => "reset",
                "poweroff" => "poweroff",
                "shutdown" => "shutdown",
                other => {
                    return Err(DomainError::unsupported(
                        &wpath.child("i6300esb").child("action"),
                        format!(
                            "unsupported action {other:?}; supported: poweroff, reset, shutdown"
                        ),
                    ));
                }
            };
            Some((
                json!({"driver": "i6300esb", "id": format!("ua-{}", w.name)}),
                action,
            ))
        }
    };
    Ok(DevicesPlan {
        sockets: DomainSockets {
            qmp: run.join("qmp.qemu"),
            serial: d
                .autoattach_serial_console
                .unwrap_or(true)
                .then(|| run.join("serial0.qemu")),
            vnc: d
                .autoattach_graphics_device
                .unwrap_or(true)
                .then(|| run.join("virt-vnc")),
            guest_agent: run.join("guest-agent.qemu"),
        },
        rng: d.rng.is_some(),
        inputs,
        usb,
        watchdog,
        balloon: d.autoattach_mem_balloon.unwrap_or(true),
    })
}
