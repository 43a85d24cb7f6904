//! The QEMU command line, assembled in one place from the plans of the other modules.
//! Block devices and guest devices are given as JSON (no escaping questions, every
//! property typed); the options QEMU only takes as `key=value` lists go through [`Opts`],
//! which doubles commas in values as QEMU's option parser requires.

use std::path::Path;

use serde_json::{Value, json};

use super::devices::{DevicesPlan, GUEST_AGENT_CHANNEL};
use super::disks::DiskPlan;
use super::facts::NodeFacts;
use super::firmware::{FirmwareKind, FirmwarePlan};
use super::machine::{Identity, MachinePlan};
use super::network::NetworkPlan;
use super::opts::Opts;

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The argument vector, program first.
pub fn assemble(
    facts: &NodeFacts,
    identity: &Identity,
    machine: &MachinePlan,
    firmware: &FirmwarePlan,
    disks: &DiskPlan,
    network: &NetworkPlan,
    devices: &DevicesPlan,
) -> Vec<String> {
    let mut args = Args(vec![path(&facts.qemu_binary)]);
    args.opt(
        "-name",
        Opts::new(&format!("guest={}", identity.qemu_name))
            .set("debug-threads", "on")
            .build(),
    );
    // Paused until the launcher has connected to QMP and the serial console, so not a byte
    // of output is lost; `cont` starts the guest.
    args.flag("-S");
    args.flag("-no-user-config");
    args.flag("-nodefaults");
    args.opt("-machine", machine_opts(machine, firmware));
    args.opt("-accel", machine.accel.to_owned());
    args.opt("-cpu", machine.cpu_model.clone());
    let vcpus = machine.sockets * machine.cores * machine.threads;
    let mut smp = Opts::new(&vcpus.to_string())
        .set("sockets", machine.sockets)
        .set("cores", machine.cores)
        .set("threads", machine.threads);
    if let Some(max) = machine.max_cpus {
        smp = smp.set("maxcpus", max);
    }
    args.opt("-smp", smp.build());
    args.opt("-m", format!("{}M", machine.memory_mib));
    args.opt("-uuid", identity.uuid.clone());
    let mut smbios = Opts::new("type=1")
        .set("manufacturer", "KubeVirt")
        .set("product", "None")
        .set("family", "KubeVirt")
        .set("uuid", &identity.uuid);
    if let Some(serial) = &machine.serial {
        smbios = smbios.set("serial", serial);
    }
    args.opt("-smbios", smbios.build());
    firmware_args(&mut args, firmware);
    args.opt("-rtc", "base=utc".to_owned());
    args.opt("-msg", "timestamp=on".to_owned());
    let sockets = &devices.sockets;
    args.opt("-chardev", socket_chardev("qmp", &sockets.qmp));
    args.opt("-mon", "chardev=qmp,mode=control".to_owned());
    match &sockets.vnc {
        Some(vnc) => {
            args.opt("-vnc", Opts::new(&format!("unix:{}", path(vnc))).build());
            args.device(json!({"driver": "VGA", "id": "video0", "vgamem_mb": 16}));
        }
        None => args.opt("-display", "none".to_owned()),
    }
    if let Some(serial) = &sockets.serial {
        args.opt("-chardev", socket_chardev("serial0", serial));
        args.opt("-serial", "chardev:serial0".to_owned());
    }
    if disks.usb || devices.usb {
        args.device(json!({"driver": "qemu-xhci", "id": "usb"}));
    }
    if disks.scsi_controller {
        args.device(json!({"driver": "virtio-scsi-pci", "id": "scsi0"}));
    }
    if disks.ahci_controller {
        args.device(json!({"driver": "ich9-ahci", "id": "sata0"}));
    }
    for drive in &disks.drives {
        for blockdev in &drive.blockdevs {
            args.opt("-blockdev", blockdev.to_string());
        }
        args.device(drive.device.clone());
    }
    for nic in &network.nics {
        args.opt("-netdev", nic.netdev.clone());
        args.device(nic.device.clone());
    }
    args.opt("-chardev", socket_chardev("qga0", &sockets.guest_agent));
    args.device(json!({"driver": "virtio-serial-pci", "id": "virtio-serial0"}));
    args.device(json!({
        "driver": "virtserialport",
        "bus": "virtio-serial0.0",
        "chardev": "qga0",
        "name": GUEST_AGENT_CHANNEL,
        "id": "channel0",
    }));
    if devices.rng {
        args.opt(
            "-object",
            json!({"qom-type": "rng-random", "id": "rng0", "filename": "/dev/urandom"}).to_string(),
        );
        args.device(json!({"driver": "virtio-rng-pci", "rng": "rng0", "id": "ua-rng"}));
    }
    for input in &devices.inputs {
        args.device(input.clone());
    }
    if let Some((device, action)) = &devices.watchdog {
        args.device(device.clone());
        args.opt("-action", format!("watchdog={action}"));
    }
    // Guest kernel panics become a GUEST_PANICKED event (and the VMI fails), as on KubeVirt.
    args.device(json!({"driver": "pvpanic", "id": "panic0"}));
    if devices.balloon {
        args.device(json!({"driver": "virtio-balloon-pci", "id": "balloon0"}));
    }
    args.0
}

struct Args(Vec<String>);

impl Args {
    fn flag(&mut self, flag: &str) {
        self.0.push(flag.to_owned());
    }

    fn opt(&mut self, flag: &str, value: String) {
        self.0.push(flag.to_owned());
        self.0.push(value);
    }

    fn device(&mut self, device: Value) {
        self.opt("-device", device.to_string());
    }
}

fn machine_opts(machine: &MachinePlan, firmware: &FirmwarePlan) -> String {
    let mut opts = Opts::new(&machine.machine_type)
        .set("usb", "off")
        .set("dump-guest-core", "off")
        .set("smm", if machine.smm { "on" } else { "off" })
        .set("acpi", if machine.acpi { "on" } else { "off" });
    if let FirmwareKind::Efi { .. } = firmware.kind {
        opts = opts.set("pflash0", "pflash0").set("pflash1", "pflash1");
    }
    opts.build()
}

fn firmware_args(args: &mut Args, firmware: &FirmwarePlan) {
    match &firmware.kind {
        FirmwareKind::Bios { image, sercon_port } => {
            args.opt("-bios", path(image));
            if let Some(file) = sercon_port {
                args.opt(
                    "-fw_cfg",
                    Opts::new("name=etc/sercon-port")
                        .set("file", path(file))
                        .build(),
                );
            }
        }
        FirmwareKind::Efi {
            code,
            vars,
            secure_boot,
        } => {
            for (node, file, read_only) in [("pflash0", code, true), ("pflash1", vars, false)] {
                args.opt(
                    "-blockdev",
                    json!({"driver": "file", "filename": path(file), "node-name": format!("{node}-file"), "read-only": read_only}).to_string(),
                );
                args.opt(
                    "-blockdev",
                    json!({"driver": "raw", "file": format!("{node}-file"), "node-name": node, "read-only": read_only}).to_string(),
                );
            }
            if *secure_boot {
                args.opt(
                    "-global",
                    "driver=cfi.pflash01,property=secure,value=on".to_owned(),
                );
            }
        }
    }
}

fn socket_chardev(id: &str, socket: &Path) -> String {
    Opts::new("socket")
        .set("id", id)
        .set("path", path(socket))
        .set("server", "on")
        .set("wait", "off")
        .build()
}
