//! Golden tests of the domain builder: each `golden/NAME.yaml` VMI, built with fixed node
//! facts, must give exactly the arguments in `golden/NAME.args` (one per line) and the
//! prepare steps in `golden/NAME.prepare`. `UPDATE_GOLDEN=1 cargo test -p ferrovirt-virt`
//! rewrites them; review the diff.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use api::kubevirt::VirtualMachineInstance;

use super::*;

fn facts(acceleration: Acceleration) -> NodeFacts {
    let firmware = |name: &str| Some(PathBuf::from(format!("/usr/share/fw/{name}")));
    let mut volumes = BTreeMap::new();
    let claim = |dir: &str| VolumeBacking::ClaimDirectory {
        dir: PathBuf::from(dir),
        capacity: 10 << 30,
    };
    volumes.insert("root".into(), claim("/pods/p/vmi-disks/root"));
    volumes.insert("install".into(), claim("/pods/p/vmi-disks/install"));
    volumes.insert("golden".into(), claim("/pods/p/vmi-disks/golden"));
    volumes.insert("ephemeral".into(), claim("/pods/p/vmi-disks/ephemeral"));
    volumes.insert(
        "data".into(),
        VolumeBacking::BlockDevice(PathBuf::from("/dev/data")),
    );
    volumes.insert(
        "containerdisk".into(),
        VolumeBacking::ContainerDiskImage(PathBuf::from("/cache/sha256-abc/disk.img")),
    );
    for name in ["config", "creds", "sa", "nocloud-drive"] {
        volumes.insert(
            name.into(),
            VolumeBacking::Files(PathBuf::from(format!("/pods/p/files/{name}"))),
        );
    }
    NodeFacts {
        qemu_binary: PathBuf::from("/usr/bin/qemu-system-x86_64"),
        acceleration,
        firmware: FirmwarePaths {
            seabios: firmware("bios-256k.bin"),
            ovmf_code: firmware("OVMF_CODE_4M.fd"),
            ovmf_vars: firmware("OVMF_VARS_4M.fd"),
            ovmf_code_secure_boot: firmware("OVMF_CODE_4M.ms.fd"),
            ovmf_vars_secure_boot: firmware("OVMF_VARS_4M.ms.fd"),
        },
        volumes,
        no_direct_io: vec![PathBuf::from("/run/vmi")],
        run_dir: PathBuf::from("/run/vmi"),
        socket_dir: PathBuf::from("/run/vmi"),
        nvram_dir: PathBuf::from("/var/lib/nvram"),
        pod_ip: IpAddr::V4(Ipv4Addr::new(127, 1, 0, 5)),
        bridges: BTreeMap::new(),
        pod_ports: BTreeMap::new(),
        may_create_tap: false,
        access_credentials: BTreeMap::from([(
            "keys".into(),
            PathBuf::from("/pods/p/secret/keys-access-cred"),
        )]),
    }
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/domain/golden")
}

fn load(name: &str) -> VirtualMachineInstance {
    let text =
        std::fs::read_to_string(golden_dir().join(format!("{name}.yaml"))).expect("golden input");
    serde_saphyr::from_str(&text).expect("a VMI")
}

fn check_golden(name: &str, acceleration: Acceleration) {
    let domain = build(&load(name), &facts(acceleration)).expect("builds");
    let args = domain.argv.join("\n") + "\n";
    let prepare = domain
        .prepare
        .iter()
        .map(|p| format!("{p:?}"))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    for (ext, actual) in [("args", args), ("prepare", prepare)] {
        let file = golden_dir().join(format!("{name}.{ext}"));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&file, &actual).expect("write golden");
            continue;
        }
        let expected = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            expected == actual,
            "{name}.{ext} differs from the golden file (UPDATE_GOLDEN=1 rewrites it):\n--- expected\n{expected}\n--- actual\n{actual}"
        );
    }
}

const TCG: Acceleration = Acceleration::Unavailable {
    emulation_allowed: true,
};

#[test]
fn golden_tcg_bios_container_disk() {
    check_golden("tcg-bios-containerdisk", TCG);
}

#[test]
fn golden_kvm_efi_secure_boot() {
    check_golden("kvm-efi-secureboot", Acceleration::Kvm);
}

#[test]
fn golden_pc_sata_config_volumes() {
    check_golden("pc-sata-config-volumes", TCG);
}

fn error_of(
    name: &str,
    edit: impl FnOnce(&mut serde_json::Value),
    acceleration: Acceleration,
) -> String {
    let mut value = serde_json::to_value(load(name)).expect("json");
    edit(&mut value);
    let vmi: VirtualMachineInstance = serde_json::from_value(value).expect("still a VMI");
    match build(&vmi, &facts(acceleration)) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn secure_boot_without_smm_is_refused_in_kubevirts_words() {
    let err = error_of(
        "kvm-efi-secureboot",
        |v| v["spec"]["domain"]["features"]["smm"]["enabled"] = false.into(),
        Acceleration::Kvm,
    );
    assert_eq!(
        err,
        "spec.domain has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled."
    );
}

#[test]
fn no_kvm_and_no_emulation_is_refused() {
    let err = error_of(
        "tcg-bios-containerdisk",
        |_| {},
        Acceleration::Unavailable {
            emulation_allowed: false,
        },
    );
    assert!(
        err.starts_with("kvm not present and emulation is not allowed"),
        "{err}"
    );
}

#[test]
fn software_emulation_is_reported() {
    let domain = build(&load("tcg-bios-containerdisk"), &facts(TCG)).expect("builds");
    assert!(domain.software_emulation);
    assert!(domain.argv.windows(2).any(|w| w == ["-accel", "tcg"]));
    assert!(domain.argv.windows(2).any(|w| w == ["-cpu", "max"]));
}

#[test]
fn unmodelled_fields_are_refused_by_name() {
    let err = error_of(
        "tcg-bios-containerdisk",
        |v| v["spec"]["domain"]["devices"]["tpm"] = serde_json::json!({}),
        TCG,
    );
    assert_eq!(
        err,
        "spec.domain.devices.tpm: not supported by this launcher"
    );
}

#[test]
fn a_volume_without_backing_is_named() {
    // The backing map is keyed by volume name; renaming the volume loses it.
    let err = error_of(
        "kvm-efi-secureboot",
        |v| {
            v["spec"]["volumes"][0]["name"] = "unbacked".into();
            v["spec"]["domain"]["devices"]["disks"][0]["name"] = "unbacked".into();
        },
        Acceleration::Kvm,
    );
    assert_eq!(
        err,
        "spec.volumes[0]: volume \"unbacked\" has nothing backing it on this node"
    );
}

#[test]
fn cache_none_needs_direct_io() {
    let err = error_of(
        "tcg-bios-containerdisk",
        |v| v["spec"]["domain"]["devices"]["disks"][0]["cache"] = "none".into(),
        TCG,
    );
    assert!(
        err.starts_with("spec.domain.devices.disks[0].cache: cache mode none needs O_DIRECT"),
        "{err}"
    );
}

#[test]
fn a_virtio_cdrom_is_refused() {
    let err = error_of(
        "kvm-efi-secureboot",
        |v| v["spec"]["domain"]["devices"]["disks"][1]["cdrom"]["bus"] = "virtio".into(),
        Acceleration::Kvm,
    );
    assert_eq!(
        err,
        "spec.domain.devices.disks[1].cdrom.bus: Bus type virtio is invalid for CD-ROM device"
    );
}

#[test]
fn duplicate_boot_orders_are_refused() {
    let err = error_of(
        "kvm-efi-secureboot",
        |v| v["spec"]["domain"]["devices"]["disks"][1]["bootOrder"] = 1.into(),
        Acceleration::Kvm,
    );
    assert!(
        err.starts_with("spec.domain.devices.disks[1].bootOrder"),
        "{err}"
    );
}

#[test]
fn missing_firmware_is_named() {
    let vmi = load("kvm-efi-secureboot");
    let mut f = facts(Acceleration::Kvm);
    f.firmware.ovmf_code_secure_boot = None;
    let err = build(&vmi, &f).expect_err("no firmware").to_string();
    assert!(
        err.starts_with("spec.domain.firmware.bootloader.efi: OVMF secure boot firmware not found"),
        "{err}"
    );
}

#[test]
fn bridge_binding_needs_a_bridge_and_a_tap() {
    let edit = |v: &mut serde_json::Value| {
        let iface = &mut v["spec"]["domain"]["devices"]["interfaces"][0];
        iface.as_object_mut().map(|o| o.remove("masquerade"));
        iface.as_object_mut().map(|o| o.remove("ports"));
        iface["bridge"] = serde_json::json!({});
    };
    let err = error_of("tcg-bios-containerdisk", edit, TCG);
    assert!(err.contains("has no Linux bridge on this node"), "{err}");
    let mut value = serde_json::to_value(load("tcg-bios-containerdisk")).expect("json");
    edit(&mut value);
    let vmi: VirtualMachineInstance = serde_json::from_value(value).expect("VMI");
    let mut f = facts(TCG);
    f.bridges.insert("default".into(), "br0".into());
    f.may_create_tap = true;
    let domain = build(&vmi, &f).expect("builds");
    assert_eq!(domain.taps.len(), 1);
    assert_eq!(domain.taps[0].bridge, "br0");
    assert!(domain.taps[0].name.len() <= 15);
}

#[test]
fn a_pod_interface_joins_the_in_pod_bridge_and_lends_the_guest_its_mac() {
    let mut value = serde_json::to_value(load("tcg-bios-containerdisk")).expect("json");
    let iface = &mut value["spec"]["domain"]["devices"]["interfaces"][0];
    for field in ["masquerade", "ports", "macAddress"] {
        iface.as_object_mut().map(|o| o.remove(field));
    }
    iface["bridge"] = serde_json::json!({});
    let vmi: VirtualMachineInstance = serde_json::from_value(value).expect("VMI");
    let mut f = facts(TCG);
    f.bridges.insert("default".into(), "k6t-16477688c0e".into());
    f.pod_ports.insert(
        "default".into(),
        PodPort {
            interface: "pod16477688c0e".into(),
            mac: "0A:58:0A:00:00:07".into(),
        },
    );
    f.may_create_tap = true;
    let domain = build(&vmi, &f).expect("builds");
    assert_eq!(domain.taps[0].pod_port.as_deref(), Some("pod16477688c0e"));
    assert_eq!(domain.taps[0].bridge, "k6t-16477688c0e");
    let args = domain.argv.join(" ");
    assert!(args.contains("\"mac\":\"0a:58:0a:00:00:07\""), "{args}");
}

/// The cloud-init data of the golden NoCloud VMI with `credentials` as its access credentials.
fn no_cloud_data_with(
    credentials: serde_json::Value,
) -> Result<crate::cloudinit::CloudInitData, String> {
    let mut value = serde_json::to_value(load("tcg-bios-containerdisk")).expect("json");
    value["spec"]["accessCredentials"] = credentials;
    value["metadata"]["annotations"] =
        serde_json::json!({"kubevirt.io/cluster-instancetype-name": "u1.small"});
    let vmi: VirtualMachineInstance = serde_json::from_value(value).expect("still a VMI");
    let domain = build(&vmi, &facts(TCG)).map_err(|e| e.to_string())?;
    domain
        .prepare
        .into_iter()
        .find_map(|step| match step {
            PrepareStep::CloudInitIso { data, .. } => Some(data),
            _ => None,
        })
        .ok_or_else(|| "no cloud-init ISO".to_owned())
}

#[test]
fn no_cloud_ssh_keys_come_from_the_access_credentials_mounted_secret() {
    let data = no_cloud_data_with(serde_json::json!([
        {"sshPublicKey": {"source": {"secret": {"secretName": "keys"}},
                          "propagationMethod": {"noCloud": {}}}},
    ]))
    .expect("built");
    assert_eq!(
        data.ssh_key_dirs,
        [PathBuf::from("/pods/p/secret/keys-access-cred")]
    );
    assert_eq!(data.instance_type.as_deref(), Some("u1.small"));
}

#[test]
fn an_unmounted_access_credential_secret_is_named() {
    let error = no_cloud_data_with(serde_json::json!([
        {"sshPublicKey": {"source": {"secret": {"secretName": "other"}},
                          "propagationMethod": {"noCloud": {}}}},
    ]))
    .expect_err("refused");
    assert!(
        error.contains("spec.accessCredentials[0]") && error.contains("other-access-cred"),
        "{error}"
    );
}
