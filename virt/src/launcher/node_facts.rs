//! Gathers the [`NodeFacts`] of a VMI: probes KVM, finds the firmware, resolves each
//! volume to what backs it (given paths, else KubeVirt's paths in the launcher pod), pulls
//! containerDisks, and probes where O_DIRECT works.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use api::kubevirt::VirtualMachineInstance;
use api::kubevirt::vmi::{AccessCredential, Volume};

use crate::accel::{KvmProbe, probe_kvm};
use crate::container_disk::{ContainerDiskCache, ContainerDiskError};
use crate::domain::{Acceleration, FirmwarePaths, NodeFacts, PodPort, VolumeBacking};

/// Where the kernel lists the links of the launcher's network namespace.
const SYS_CLASS_NET: &str = "/sys/class/net";
/// Where firmware is looked for: Debian's packages, then the paths KubeVirt's images use.
const SEABIOS: &[&str] = &[
    "/usr/share/seabios/bios-256k.bin",
    "/usr/share/qemu/bios-256k.bin",
];
const OVMF_DIRS: &[&str] = &["/usr/share/OVMF", "/usr/share/edk2/ovmf", "/usr/share/qemu"];

/// How the launcher finds what the node offers.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    pub qemu_binary: PathBuf,
    /// KubeVirt's `useEmulation`: TCG when KVM is unusable.
    pub allow_emulation: bool,
    /// Node-wide caches: the KVM probe, containerDisks.
    pub node_cache: PathBuf,
    /// Registries pulled from over plain HTTP or unverified TLS.
    pub insecure_registries: Vec<String>,
    /// The VMI's private directory.
    pub run_dir: PathBuf,
    /// Where persistent EFI variable stores live.
    pub nvram_dir: PathBuf,
    /// Volume name to its path, as given (`--volume NAME=PATH`).
    pub volume_paths: BTreeMap<String, PathBuf>,
    /// The root of KubeVirt's launcher pod layout for volumes not given; `None` when every
    /// volume must be given.
    pub pod_layout: Option<PathBuf>,
    pub pod_ip: IpAddr,
    /// Network name to a Linux bridge, for `bridge` bindings.
    pub bridges: BTreeMap<String, String>,
    /// Pod interface name (KubeVirt's `pod<hash>` of a secondary network) to the Linux
    /// bridge the pod's network attachment names.
    pub pod_bridges: BTreeMap<String, String>,
}

/// Why the node's facts could not be gathered.
#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    #[error("spec.volumes[{index}]: volume {name:?} {problem}")]
    Volume {
        index: usize,
        name: String,
        problem: String,
    },
    #[error(transparent)]
    ContainerDisk(#[from] ContainerDiskError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Gathers the facts of `vmi` on this node.
pub async fn gather(
    vmi: &VirtualMachineInstance,
    settings: &NodeSettings,
) -> Result<NodeFacts, FactsError> {
    std::fs::create_dir_all(&settings.run_dir).map_err(|source| FactsError::Io {
        path: settings.run_dir.clone(),
        source,
    })?;
    let acceleration = match probe_kvm(&settings.qemu_binary, &settings.node_cache).await {
        KvmProbe::Usable => Acceleration::Kvm,
        probe => {
            tracing::info!(
                ?probe,
                allow_emulation = settings.allow_emulation,
                "KVM is not usable"
            );
            Acceleration::Unavailable {
                emulation_allowed: settings.allow_emulation,
            }
        }
    };
    let cache = ContainerDiskCache::new(
        settings.node_cache.join("container-disks"),
        settings.insecure_registries.clone(),
    );
    let mut volumes = BTreeMap::new();
    let mut probe_dirs = vec![settings.run_dir.clone()];
    for (index, volume) in vmi.spec.volumes.iter().flatten().enumerate() {
        let backing = backing(index, volume, settings, &cache).await?;
        if let Some(backing) = backing {
            match &backing {
                VolumeBacking::ClaimDirectory { dir, .. } => probe_dirs.push(dir.clone()),
                VolumeBacking::BlockDevice(dev) => probe_dirs.push(dev.clone()),
                VolumeBacking::ContainerDiskImage(_) | VolumeBacking::Files(_) => {}
            }
            volumes.insert(volume.name.clone(), backing);
        }
    }
    for volume in vmi.spec.volumes.iter().flatten() {
        if let Some(host) = &volume.host_disk
            && let Some(dir) = Path::new(&host.path).parent()
        {
            probe_dirs.push(dir.to_path_buf());
        }
    }
    let no_direct_io = probe_dirs
        .into_iter()
        .filter(|p| !direct_io_works(p))
        .collect();
    let mut bridges = bridges_by_network(vmi, &settings.bridges, &settings.pod_bridges);
    let pod_ports = pod_ports(vmi, &bridges, Path::new(SYS_CLASS_NET), &settings.run_dir);
    for (network, port) in &pod_ports {
        bridges.insert(network.clone(), in_pod_bridge_name(&port.interface));
    }
    Ok(NodeFacts {
        qemu_binary: settings.qemu_binary.clone(),
        acceleration,
        firmware: find_firmware(),
        volumes,
        no_direct_io,
        run_dir: settings.run_dir.clone(),
        socket_dir: crate::unix_path::socket_dir(&settings.run_dir).map_err(|source| {
            FactsError::Io {
                path: settings.run_dir.clone(),
                source,
            }
        })?,
        nvram_dir: settings.nvram_dir.clone(),
        pod_ip: settings.pod_ip,
        bridges,
        pod_ports,
        may_create_tap: rustix::process::geteuid().is_root() && Path::new("/dev/net/tun").exists(),
        access_credentials: access_credential_dirs(vmi, settings),
    })
}

/// Where each access credential's Secret is mounted: given as `--volume
/// <secret>-access-cred=PATH`, else where KubeVirt's launcher pod mounts it. A Secret with
/// no directory is left out; the domain names it if a key must be read from it.
fn access_credential_dirs(
    vmi: &VirtualMachineInstance,
    settings: &NodeSettings,
) -> BTreeMap<String, PathBuf> {
    let secrets = vmi
        .spec
        .access_credentials
        .iter()
        .flatten()
        .filter_map(AccessCredential::secret_name);
    secrets
        .filter_map(|secret| {
            let volume = AccessCredential::volume_name(secret);
            let dir = match settings.volume_paths.get(&volume) {
                Some(path) => path.clone(),
                None => settings
                    .pod_layout
                    .as_ref()?
                    .join("var/run/kubevirt-private/secret")
                    .join(&volume),
            };
            dir.is_dir().then(|| (secret.to_owned(), dir))
        })
        .collect()
}

/// The bridge of each network with one: given by network name, or found through the pod
/// interface KubeVirt names after a secondary network.
fn bridges_by_network(
    vmi: &VirtualMachineInstance,
    given: &BTreeMap<String, String>,
    by_pod_interface: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut bridges = BTreeMap::new();
    for network in vmi.spec.networks.iter().flatten() {
        if network.multus.is_none() {
            continue;
        }
        let interface = api::network_attachment::pod_interface_name(&network.name);
        if let Some(bridge) = by_pod_interface.get(&interface) {
            bridges.insert(network.name.clone(), bridge.clone());
        }
    }
    bridges.extend(given.clone());
    bridges
}

/// The pod interfaces a CNI plugin made for the VMI's secondary networks that have no node
/// bridge given (a launcher pod on a cluster), found under `sys_class_net` by KubeVirt's
/// `pod<hash>` names, with the MAC address each had before the launcher first touched it
/// (kept in `run_dir`, as KubeVirt's interface cache: attaching gives the interface a new
/// one, and a start tried again must hand the guest the original).
fn pod_ports(
    vmi: &VirtualMachineInstance,
    bridges: &BTreeMap<String, String>,
    sys_class_net: &Path,
    run_dir: &Path,
) -> BTreeMap<String, PodPort> {
    let mut ports = BTreeMap::new();
    for network in vmi.spec.networks.iter().flatten() {
        if network.multus.is_none() || bridges.contains_key(&network.name) {
            continue;
        }
        let interface = api::network_attachment::pod_interface_name(&network.name);
        let link = sys_class_net.join(&interface);
        let read = |name: &str| std::fs::read_to_string(link.join(name)).ok();
        let (Some(ifindex), Some(current)) = (read("ifindex"), read("address")) else {
            continue;
        };
        // "IFINDEX MAC": kept for this very interface only, not a namesake in a later pod.
        let cached = run_dir.join(format!("{interface}.mac"));
        let mac = match std::fs::read_to_string(&cached).ok().and_then(|text| {
            text.strip_prefix(&format!("{} ", ifindex.trim()))
                .map(str::to_owned)
        }) {
            Some(original) => original,
            None => {
                let record = format!("{} {}", ifindex.trim(), current.trim());
                if let Err(error) = std::fs::write(&cached, record) {
                    tracing::warn!(%interface, %error, "cannot keep the pod interface's MAC");
                }
                current
            }
        };
        ports.insert(
            network.name.clone(),
            PodPort {
                interface,
                mac: mac.trim().to_owned(),
            },
        );
    }
    ports
}

/// The launcher's bridge in the pod for a pod interface, as KubeVirt names it: `k6t-` and
/// the interface's hash.
fn in_pod_bridge_name(pod_interface: &str) -> String {
    format!(
        "k6t-{}",
        pod_interface.strip_prefix("pod").unwrap_or(pod_interface)
    )
}

/// What backs `volume`, or `None` for volumes made entirely by the launcher.
async fn backing(
    index: usize,
    volume: &Volume,
    settings: &NodeSettings,
    cache: &ContainerDiskCache,
) -> Result<Option<VolumeBacking>, FactsError> {
    let name = &volume.name;
    let fail = |problem: String| FactsError::Volume {
        index,
        name: name.clone(),
        problem,
    };
    if let Some(cd) = &volume.container_disk {
        return Ok(Some(VolumeBacking::ContainerDiskImage(
            cache
                .image(&cd.image, cd.image_pull_policy.as_deref())
                .await?,
        )));
    }
    if volume.empty_disk.is_some() || volume.host_disk.is_some() {
        return Ok(None);
    }
    let cloud_init = volume
        .cloud_init_no_cloud
        .as_ref()
        .or(volume.cloud_init_config_drive.as_ref());
    if let Some(ci) = cloud_init
        && ci.secret_ref.is_none()
        && ci.network_data_secret_ref.is_none()
    {
        return Ok(None);
    }
    let is_claim = volume.persistent_volume_claim.is_some()
        || volume.data_volume.is_some()
        || volume.ephemeral.is_some();
    let path = match settings.volume_paths.get(name) {
        Some(path) => path.clone(),
        None => match &settings.pod_layout {
            Some(root) => kubevirt_path(root, volume),
            None => {
                return Err(fail(format!(
                    "has no path on this machine: give one with --volume {name}=PATH"
                )));
            }
        },
    };
    let optional = volume
        .config_map
        .as_ref()
        .and_then(|c| c.optional)
        .unwrap_or(false)
        || volume
            .secret
            .as_ref()
            .and_then(|s| s.optional)
            .unwrap_or(false);
    if optional && !path.exists() {
        // An optional ConfigMap or Secret that does not exist is an empty disk.
        let empty = settings.run_dir.join(format!("empty-files-{name}"));
        std::fs::create_dir_all(&empty).map_err(|e| fail(format!("cannot be made empty: {e}")))?;
        return Ok(Some(VolumeBacking::Files(empty)));
    }
    let meta = std::fs::metadata(&path)
        .map_err(|e| fail(format!("cannot be used: {}: {e}", path.display())))?;
    if !is_claim {
        if !meta.is_dir() {
            return Err(fail(format!(
                "needs a directory of files, but {} is not one",
                path.display()
            )));
        }
        return Ok(Some(VolumeBacking::Files(path)));
    }
    if meta.file_type().is_block_device() {
        return Ok(Some(VolumeBacking::BlockDevice(path)));
    }
    if !meta.is_dir() {
        return Err(fail(format!(
            "is a claim, so its path must be the claim's directory (holding disk.img) or a block \
             device; {} is neither",
            path.display()
        )));
    }
    // A disk.img made here may use what the filesystem has free for it (not its reserved
    // blocks or metadata), rounded down to whole MiB.
    let capacity = rustix::fs::statvfs(&path)
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize) & !((1 << 20) - 1))
        .map_err(|e| fail(format!("cannot be measured: {}: {e}", path.display())))?;
    Ok(Some(VolumeBacking::ClaimDirectory {
        dir: path,
        capacity,
    }))
}

/// Where KubeVirt's launcher pod has a volume, under `root`.
fn kubevirt_path(root: &Path, volume: &Volume) -> PathBuf {
    let private = root.join("var/run/kubevirt-private");
    let name = &volume.name;
    if volume.config_map.is_some() {
        private.join("config-map").join(name)
    } else if volume.secret.is_some()
        || volume.cloud_init_no_cloud.is_some()
        || volume.cloud_init_config_drive.is_some()
    {
        private.join("secret").join(name)
    } else if volume.downward_api.is_some() {
        private.join("downwardapi").join(name)
    } else if volume.service_account.is_some() {
        root.join("var/run/secrets/kubernetes.io/serviceaccount")
    } else {
        let block = root.join("dev").join(name);
        if block.exists() {
            block
        } else {
            private.join("vmi-disks").join(name)
        }
    }
}

fn find_firmware() -> FirmwarePaths {
    let first = |candidates: &[PathBuf]| candidates.iter().find(|p| p.is_file()).cloned();
    let ovmf = |names: &[&str]| {
        let candidates: Vec<PathBuf> = OVMF_DIRS
            .iter()
            .flat_map(|dir| names.iter().map(move |n| Path::new(dir).join(n)))
            .collect();
        first(&candidates)
    };
    let seabios: Vec<PathBuf> = SEABIOS.iter().map(PathBuf::from).collect();
    FirmwarePaths {
        seabios: first(&seabios),
        ovmf_code: ovmf(&["OVMF_CODE_4M.fd", "OVMF_CODE.fd"]),
        ovmf_vars: ovmf(&["OVMF_VARS_4M.fd", "OVMF_VARS.fd"]),
        ovmf_code_secure_boot: ovmf(&["OVMF_CODE_4M.secboot.fd", "OVMF_CODE.secboot.fd"]),
        ovmf_vars_secure_boot: ovmf(&[
            "OVMF_VARS_4M.ms.fd",
            "OVMF_VARS.secboot.fd",
            "OVMF_VARS.ms.fd",
        ]),
    }
}

/// Whether files in `path` (a directory) or `path` itself (a device) open with O_DIRECT.
fn direct_io_works(path: &Path) -> bool {
    use rustix::fs::{Mode, OFlags, open};
    let is_dir = path.is_dir();
    if !is_dir {
        return open(
            path,
            OFlags::RDONLY | OFlags::DIRECT | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .is_ok();
    }
    let probe = path.join(format!(".direct-io-probe-{}", std::process::id()));
    let result = open(
        &probe,
        OFlags::CREATE | OFlags::RDWR | OFlags::DIRECT | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    );
    let _ = std::fs::remove_file(&probe);
    result.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_interface_without_a_node_bridge_becomes_a_port() {
        let vmi: VirtualMachineInstance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "v"},
            "spec": {"domain": {"devices": {}}, "networks": [
                {"name": "blue", "multus": {"networkName": "br1"}},
                {"name": "red", "multus": {"networkName": "br2"}},
                {"name": "green", "multus": {"networkName": "br3"}},
            ]},
        }))
        .unwrap();
        let sys = tempfile::tempdir().unwrap();
        for network in ["blue", "red"] {
            let dir = sys
                .path()
                .join(api::network_attachment::pod_interface_name(network));
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("address"), "0a:58:0a:00:00:07\n").unwrap();
            std::fs::write(dir.join("ifindex"), "7\n").unwrap();
        }
        // red has a node bridge given; green has no pod interface.
        let given = BTreeMap::from([("red".to_owned(), "br-red".to_owned())]);
        let run_dir = tempfile::tempdir().unwrap();
        let ports = pod_ports(&vmi, &given, sys.path(), run_dir.path());
        assert_eq!(
            ports,
            BTreeMap::from([(
                "blue".to_owned(),
                PodPort {
                    interface: "pod16477688c0e".into(),
                    mac: "0a:58:0a:00:00:07".into()
                }
            )])
        );
        assert_eq!(in_pod_bridge_name("pod16477688c0e"), "k6t-16477688c0e");
        // Attached, the interface has a new MAC; a second start still hands the old one on.
        let blue = sys.path().join("pod16477688c0e");
        std::fs::write(blue.join("address"), "02:11:22:33:44:55\n").unwrap();
        let again = pod_ports(&vmi, &given, sys.path(), run_dir.path());
        assert_eq!(again["blue"].mac, "0a:58:0a:00:00:07");
        // Another interface of that name (a new pod's) is read afresh.
        std::fs::write(blue.join("ifindex"), "9\n").unwrap();
        let new_pod = pod_ports(&vmi, &given, sys.path(), run_dir.path());
        assert_eq!(new_pod["blue"].mac, "02:11:22:33:44:55");
    }

    #[test]
    fn secondary_networks_find_their_bridge_through_the_pod_interface() {
        let vmi: VirtualMachineInstance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "v"},
            "spec": {"domain": {"devices": {}}, "networks": [
                {"name": "default", "pod": {}},
                {"name": "blue", "multus": {"networkName": "br1"}},
                {"name": "red", "multus": {"networkName": "br2"}},
            ]},
        }))
        .unwrap();
        let by_interface = BTreeMap::from([
            ("pod16477688c0e".to_owned(), "br-blue".to_owned()),
            ("net9".to_owned(), "br-unrelated".to_owned()),
        ]);
        let given = BTreeMap::from([("red".to_owned(), "br-red".to_owned())]);
        assert_eq!(
            bridges_by_network(&vmi, &given, &by_interface),
            BTreeMap::from([
                ("blue".to_owned(), "br-blue".to_owned()),
                ("red".to_owned(), "br-red".to_owned()),
            ])
        );
    }
}
