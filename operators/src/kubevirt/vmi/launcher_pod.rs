//! The launcher pod of a VMI, in KubeVirt's shape: labels `kubevirt.io: virt-launcher` and
//! `kubevirt.io/created-by: <VMI uid>`, one `compute` container running `ferrovirt
//! virt-launcher`, claims mounted where KubeVirt's launcher finds them
//! (`/var/run/kubevirt-private/vmi-disks/<volume>` or `/dev/<volume>` for block claims),
//! ConfigMaps and Secrets under `/var/run/kubevirt-private/{config-map,secret}/<volume>`,
//! and the control socket in an emptyDir at `/var/run/kubevirt/sockets`, which virt-handler
//! reaches from the node.

use std::collections::BTreeMap;

use api::kubevirt::VirtualMachineInstance;
use api::kubevirt::keys;
use api::kubevirt::pod_contract::{SOCKETS_PATH, SOCKETS_VOLUME};
use api::network_attachment::{
    NETWORKS_ANNOTATION, NetworkSelection, pod_interface_name, qualified_name,
};
use api::quantity::{MIB, quantity_bytes};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EmptyDirVolumeSource, PersistentVolumeClaimVolumeSource, Pod,
    PodSpec, ResourceRequirements, SecretVolumeSource, Volume, VolumeDevice, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

/// The launcher's container, as KubeVirt names it.
pub const COMPUTE_CONTAINER: &str = "compute";
/// KubeVirt's default `terminationGracePeriodSeconds` of a VMI.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;
/// Seconds the pod gets beyond the VMI's grace period: the launcher kills QEMU at the end of
/// the VMI's grace and needs a moment to report it (KubeVirt adds 15 s as well).
pub const POD_EXTRA_GRACE_SECONDS: i64 = 15;
/// Memory the launcher pod asks for beyond the guest's: the launcher (~15 MiB), QEMU's own
/// code, device state and translation cache under TCG, and the pod's housekeeping.
const FIXED_OVERHEAD: u128 = 192 * MIB;
const PRIVATE: &str = "/var/run/kubevirt-private";

/// What a launcher pod needs beyond the VMI.
#[derive(Clone, Debug)]
pub struct LauncherPodSettings {
    /// The `ferrovirt` image.
    pub image: String,
    pub image_pull_policy: Option<String>,
    /// Arguments after `virt-launcher` (node settings such as `--insecure-registry`).
    pub extra_args: Vec<String>,
    /// The KubeVirt CR's `useEmulation`: without it the launcher is told to refuse TCG
    /// (`--no-emulation`), where upstream's template passes `--allow-emulation` with it.
    pub allow_emulation: bool,
    /// The KubeVirt CR's `cpuAllocationRatio`: a VMI that requests no CPU gets 1/ratio of a
    /// CPU per vCPU.
    pub cpu_allocation_ratio: u32,
    /// Whether the VMI's namespace is one the KubeVirt CR's
    /// `autoCPULimitNamespaceLabelSelector` selects: its pod's CPU is then limited to one CPU
    /// per vCPU.
    pub cpu_limit_per_vcpu: bool,
}

/// How each claim the VMI uses is presented: `true` for a block-mode claim.
pub type ClaimModes = BTreeMap<String, bool>;

/// The node resource each secondary network's pods request (the NetworkAttachmentDefinition's
/// `k8s.v1.cni.cncf.io/resourceName`), by the VMI's network name.
pub type NetworkResources = BTreeMap<String, String>;

/// The claim a VMI volume uses (`persistentVolumeClaim`, `dataVolume` or the claim under
/// `ephemeral`), with whether it is read-only.
pub fn claim_of(volume: &api::kubevirt::vmi::Volume) -> Option<(&str, bool)> {
    if let Some(pvc) = &volume.persistent_volume_claim {
        return Some((&pvc.claim_name, pvc.read_only.unwrap_or(false)));
    }
    if let Some(dv) = &volume.data_volume {
        return Some((&dv.name, false));
    }
    let ephemeral = volume
        .ephemeral
        .as_ref()?
        .persistent_volume_claim
        .as_ref()?;
    Some((&ephemeral.claim_name, true))
}

/// The launcher pod for `vmi`; `block` says which of its claims are block devices and
/// `networks` what its secondary networks need of a node.
pub fn launcher_pod(
    vmi: &VirtualMachineInstance,
    block: &ClaimModes,
    networks: &NetworkResources,
    settings: &LauncherPodSettings,
) -> Pod {
    let name = vmi.name_any();
    let uid = vmi.uid().unwrap_or_default();
    let mut labels = vmi.labels().clone();
    labels.insert(keys::APP_LABEL.into(), keys::LAUNCHER_APP.into());
    labels.insert(keys::CREATED_BY_LABEL.into(), uid);
    labels.insert(keys::VM_NAME_LABEL.into(), name.clone());
    let mut annotations = BTreeMap::from([(keys::DOMAIN_ANNOTATION.to_owned(), name.clone())]);
    if let Some(selections) = multus_networks_annotation(vmi) {
        annotations.insert(NETWORKS_ANNOTATION.to_owned(), selections);
    }
    let (volumes, mounts, devices) = pod_volumes(vmi, block);
    let grace = vmi
        .spec
        .termination_grace_period_seconds
        .unwrap_or(DEFAULT_GRACE_SECONDS);
    let mut args = vec!["virt-launcher".to_owned()];
    if !settings.allow_emulation {
        args.push("--no-emulation".to_owned());
    }
    args.extend(settings.extra_args.iter().cloned());
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("virt-launcher-{name}-")),
            namespace: vmi.namespace(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner_reference(vmi)]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: COMPUTE_CONTAINER.into(),
                image: Some(settings.image.clone()),
                image_pull_policy: settings.image_pull_policy.clone(),
                args: Some(args),
                resources: Some(resources(vmi, networks, settings)),
                volume_mounts: Some(mounts),
                volume_devices: (!devices.is_empty()).then_some(devices),
                ..Default::default()
            }],
            volumes: Some(volumes),
            restart_policy: Some("Never".into()),
            termination_grace_period_seconds: Some(grace.max(0) + POD_EXTRA_GRACE_SECONDS),
            node_selector: Some(node_selector(vmi)),
            hostname: vmi.spec.hostname.clone(),
            // As KubeVirt: the pod's priority is the API server's to resolve from the class.
            priority_class_name: vmi
                .spec
                .priority_class_name
                .clone()
                .filter(|name| !name.is_empty()),
            automount_service_account_token: Some(false),
            ..Default::default()
        }),
        status: None,
    }
}

fn owner_reference(vmi: &VirtualMachineInstance) -> OwnerReference {
    OwnerReference {
        api_version: VirtualMachineInstance::api_version(&()).into_owned(),
        kind: VirtualMachineInstance::kind(&()).into_owned(),
        name: vmi.name_any(),
        uid: vmi.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The pod's volumes with the compute container's mounts and devices.
fn pod_volumes(
    vmi: &VirtualMachineInstance,
    block: &ClaimModes,
) -> (Vec<Volume>, Vec<VolumeMount>, Vec<VolumeDevice>) {
    let mut volumes = vec![Volume {
        name: SOCKETS_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    }];
    let mut mounts = vec![VolumeMount {
        name: SOCKETS_VOLUME.into(),
        mount_path: SOCKETS_PATH.into(),
        ..Default::default()
    }];
    let mut devices = Vec::new();
    for volume in vmi.spec.volumes.iter().flatten() {
        let name = volume.name.clone();
        let mount = |path: String, read_only: bool| VolumeMount {
            name: name.clone(),
            mount_path: path,
            read_only: read_only.then_some(true),
            ..Default::default()
        };
        if let Some((claim, read_only)) = claim_of(volume) {
            volumes.push(Volume {
                name: name.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.to_owned(),
                    read_only: read_only.then_some(true),
                }),
                ..Default::default()
            });
            if block.get(claim).copied().unwrap_or(false) {
                devices.push(VolumeDevice {
                    name: name.clone(),
                    device_path: format!("/dev/{name}"),
                });
            } else {
                mounts.push(mount(format!("{PRIVATE}/vmi-disks/{name}"), false));
            }
        } else if let Some(source) = &volume.config_map {
            volumes.push(Volume {
                name: name.clone(),
                config_map: Some(ConfigMapVolumeSource {
                    name: source.name.clone().unwrap_or_default(),
                    optional: source.optional,
                    ..Default::default()
                }),
                ..Default::default()
            });
            mounts.push(mount(format!("{PRIVATE}/config-map/{name}"), true));
        } else if let Some(secret) = secret_of(volume) {
            volumes.push(Volume {
                name: name.clone(),
                secret: Some(secret),
                ..Default::default()
            });
            mounts.push(mount(format!("{PRIVATE}/secret/{name}"), true));
        }
    }
    for secret in access_credential_secrets(vmi) {
        let name = api::kubevirt::vmi::AccessCredential::volume_name(secret);
        mounts.push(VolumeMount {
            name: name.clone(),
            mount_path: format!("{PRIVATE}/secret/{name}"),
            read_only: Some(true),
            ..Default::default()
        });
        volumes.push(Volume {
            name,
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    (volumes, mounts, devices)
}

/// The Secrets of the VMI's access credentials, each once: KubeVirt mounts each as the
/// volume `<secret>-access-cred` under the launcher's secret directory, where the launcher
/// reads SSH keys for cloud-init and the guest agent.
fn access_credential_secrets(vmi: &VirtualMachineInstance) -> std::collections::BTreeSet<&str> {
    vmi.spec
        .access_credentials
        .iter()
        .flatten()
        .filter_map(api::kubevirt::vmi::AccessCredential::secret_name)
        .collect()
}

/// The Secret a `secret` volume, or a cloud-init volume's `secretRef`, is read from.
fn secret_of(volume: &api::kubevirt::vmi::Volume) -> Option<SecretVolumeSource> {
    if let Some(secret) = &volume.secret {
        return Some(SecretVolumeSource {
            secret_name: secret.secret_name.clone(),
            optional: secret.optional,
            ..Default::default()
        });
    }
    let cloud_init = volume
        .cloud_init_no_cloud
        .as_ref()
        .or(volume.cloud_init_config_drive.as_ref())?;
    let reference = cloud_init.secret_ref.as_ref()?;
    Some(SecretVolumeSource {
        secret_name: reference.name.clone(),
        ..Default::default()
    })
}

/// Multus's networks annotation for the VMI's secondary networks, as KubeVirt writes it: each
/// NetworkAttachmentDefinition with the pod interface named after the VMI's network and the
/// interface's MAC address; `None` without secondary networks.
fn multus_networks_annotation(vmi: &VirtualMachineInstance) -> Option<String> {
    let namespace = vmi.namespace().unwrap_or_default();
    let interfaces = vmi
        .spec
        .domain
        .devices
        .interfaces
        .as_deref()
        .unwrap_or_default();
    let selections: Vec<NetworkSelection> = vmi
        .spec
        .networks
        .iter()
        .flatten()
        .filter_map(|network| {
            let multus = network
                .multus
                .as_ref()
                .filter(|m| m.default != Some(true))?;
            let (nad_namespace, nad_name) = qualified_name(&namespace, &multus.network_name);
            let mac = interfaces
                .iter()
                .find(|i| i.name == network.name)
                .and_then(|i| i.mac_address.clone())
                .unwrap_or_default();
            Some(NetworkSelection {
                name: nad_name.to_owned(),
                namespace: nad_namespace.to_owned(),
                interface: pod_interface_name(&network.name),
                mac,
            })
        })
        .collect();
    if selections.is_empty() {
        return None;
    }
    serde_json::to_string(&selections).ok()
}

/// The compute container's requests and limits: the guest's memory plus the launcher's
/// overhead, the VMI's CPU request or limit (without a request, 1/ratio of a CPU per vCPU;
/// without a limit in a namespace under automatic CPU limits, one CPU per vCPU), and one of
/// each secondary network's node resource (a bridge on the node, say), as KubeVirt asks for
/// them.
fn resources(
    vmi: &VirtualMachineInstance,
    networks: &NetworkResources,
    settings: &LauncherPodSettings,
) -> ResourceRequirements {
    let domain = &vmi.spec.domain;
    let vmi_resources = domain.resources.as_ref();
    let from =
        |map: Option<&BTreeMap<String, Quantity>>, key: &str| map.and_then(|m| m.get(key)).cloned();
    let requests = vmi_resources.and_then(|r| r.requests.as_ref());
    let limits = vmi_resources.and_then(|r| r.limits.as_ref());
    let guest = domain
        .memory
        .as_ref()
        .and_then(|m| m.guest.clone())
        .or_else(|| from(requests, "memory"))
        .or_else(|| from(limits, "memory"));
    let mut pod_requests = BTreeMap::new();
    let mut pod_limits = BTreeMap::new();
    if let Some(bytes) = guest.as_ref().and_then(quantity_bytes) {
        let with_overhead = bytes + FIXED_OVERHEAD + bytes / 100;
        pod_requests.insert("memory".into(), mebibytes(with_overhead));
        if from(limits, "memory").is_some() {
            pod_limits.insert("memory".into(), mebibytes(with_overhead));
        }
    }
    // Dedicated CPUs are requested by the VMI itself; KubeVirt renders neither the shared
    // request nor the automatic limit for them.
    let shared = !vmi.spec.dedicated_cpus();
    let cpu_request = from(requests, "cpu")
        .or_else(|| shared.then(|| shared_cpus(vmi, settings.cpu_allocation_ratio)));
    if let Some(cpu) = cpu_request {
        pod_requests.insert("cpu".into(), cpu);
    }
    let cpu_limit = from(limits, "cpu").or_else(|| {
        (shared && settings.cpu_limit_per_vcpu).then(|| Quantity(vmi.spec.vcpus().to_string()))
    });
    if let Some(cpu) = cpu_limit {
        pod_limits.insert("cpu".into(), cpu);
    }
    // One of the resource per network that names it: two NICs on one bridge ask for two.
    let mut per_resource: BTreeMap<&str, usize> = BTreeMap::new();
    for resource in networks.values() {
        *per_resource.entry(resource).or_default() += 1;
    }
    for (resource, count) in per_resource {
        pod_requests.insert(resource.to_owned(), Quantity(count.to_string()));
        pod_limits.insert(resource.to_owned(), Quantity(count.to_string()));
    }
    ResourceRequirements {
        requests: (!pod_requests.is_empty()).then_some(pod_requests),
        limits: (!pod_limits.is_empty()).then_some(pod_limits),
        ..Default::default()
    }
}

/// The CPU a VMI that asks for none gets, as virt-controller renders it: its vCPUs over the
/// allocation ratio, in millicores below one CPU (rounded up to a whole millicore).
fn shared_cpus(vmi: &VirtualMachineInstance, ratio: u32) -> Quantity {
    let millis = (vmi.spec.vcpus() * 1000).div_ceil(u64::from(ratio.max(1)));
    if millis % 1000 == 0 {
        Quantity((millis / 1000).to_string())
    } else {
        Quantity(format!("{millis}m"))
    }
}

fn mebibytes(bytes: u128) -> Quantity {
    Quantity(format!("{}Mi", bytes.div_ceil(MIB)))
}

/// The VMI's node selector and KubeVirt's own: only nodes where virt-handler runs.
fn node_selector(vmi: &VirtualMachineInstance) -> BTreeMap<String, String> {
    let mut selector = vmi.spec.node_selector.clone().unwrap_or_default();
    selector.insert(keys::NODE_SCHEDULABLE_LABEL.into(), "true".into());
    selector
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi(yaml: &str) -> VirtualMachineInstance {
        serde_saphyr::from_str(yaml).expect("test VMI")
    }

    fn settings() -> LauncherPodSettings {
        LauncherPodSettings {
            image: "quay.io/ferrovirt/ferrovirt:latest".into(),
            image_pull_policy: None,
            extra_args: vec!["--insecure-registry".into(), "localhost:5000".into()],
            allow_emulation: true,
            cpu_allocation_ratio: 10,
            cpu_limit_per_vcpu: false,
        }
    }

    const VMI: &str = r#"
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm1, namespace: ns, uid: u-1, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 10
  domain:
    resources: {requests: {memory: 128Mi, cpu: 500m}}
    devices: {}
  volumes:
  - name: root
    dataVolume: {name: root-dv}
  - name: raw
    persistentVolumeClaim: {claimName: raw-pvc}
  - name: seed
    cloudInitNoCloud: {secretRef: {name: user-data}}
  - name: cfg
    configMap: {name: app-config}
  - name: scratch
    emptyDisk: {capacity: 1Gi}
"#;

    /// The compute container's resources of the launcher pod of the VMI `yaml`.
    fn compute_resources(yaml: &str, settings: &LauncherPodSettings) -> ResourceRequirements {
        let pod = launcher_pod(
            &vmi(yaml),
            &ClaimModes::new(),
            &NetworkResources::new(),
            settings,
        );
        pod.spec.unwrap().containers[0].resources.clone().unwrap()
    }

    #[test]
    fn a_vmi_without_a_cpu_request_gets_its_vcpus_over_the_allocation_ratio() {
        let request = |yaml: &str, ratio: u32| {
            let settings = LauncherPodSettings {
                cpu_allocation_ratio: ratio,
                ..settings()
            };
            let resources = compute_resources(yaml, &settings);
            resources.requests.unwrap()["cpu"].0.clone()
        };
        let without = VMI.replace(", cpu: 500m", "");
        assert_eq!(request(&without, 10), "100m", "one vCPU, KubeVirt's ratio");
        assert_eq!(request(&without, 1), "1");
        assert_eq!(request(&without, 3), "334m", "rounded up to a millicore");
        let topology = without.replace(
            "devices: {}",
            "devices: {}\n    cpu: {sockets: 2, cores: 2}",
        );
        assert_eq!(request(&topology, 10), "400m");
        assert_eq!(request(&topology, 2), "2");
        assert_eq!(request(VMI, 10), "500m", "the VMI's own request wins");
        let limited = without.replace("memory: 128Mi}", "memory: 128Mi}, limits: {cpu: '4'}");
        assert_eq!(
            request(&limited, 10),
            "400m",
            "no topology: a vCPU per CPU of the limit, as the guest gets them"
        );
    }

    #[test]
    fn dedicated_cpus_get_no_shared_request_nor_automatic_limit() {
        let dedicated = VMI.replace(", cpu: 500m", "").replace(
            "devices: {}",
            "devices: {}\n    cpu: {cores: 2, dedicatedCpuPlacement: true}",
        );
        let settings = LauncherPodSettings {
            cpu_limit_per_vcpu: true,
            ..settings()
        };
        let resources = compute_resources(&dedicated, &settings);
        assert!(!resources.requests.unwrap_or_default().contains_key("cpu"));
        assert!(!resources.limits.unwrap_or_default().contains_key("cpu"));
    }

    #[test]
    fn a_namespace_under_automatic_cpu_limits_limits_a_vmi_to_its_vcpus() {
        let limits = |yaml: &str, auto: bool| {
            let settings = LauncherPodSettings {
                cpu_limit_per_vcpu: auto,
                ..settings()
            };
            let resources = compute_resources(yaml, &settings);
            resources
                .limits
                .and_then(|l| l.get("cpu").map(|q| q.0.clone()))
        };
        let topology = VMI.replace(
            "devices: {}",
            "devices: {}\n    cpu: {sockets: 1, cores: 3}",
        );
        assert_eq!(limits(&topology, true).as_deref(), Some("3"));
        assert_eq!(limits(&topology, false), None);
        let limited = topology.replace("cpu: 500m}", "cpu: 500m}, limits: {cpu: '2'}");
        assert_eq!(
            limits(&limited, true).as_deref(),
            Some("2"),
            "the VMI's own limit wins"
        );
    }

    #[test]
    fn a_launcher_without_use_emulation_is_told_to_refuse_it() {
        let strict = LauncherPodSettings {
            allow_emulation: false,
            ..settings()
        };
        let pod = launcher_pod(
            &vmi(VMI),
            &ClaimModes::new(),
            &NetworkResources::new(),
            &strict,
        );
        let args = pod.spec.unwrap().containers[0].args.clone().unwrap();
        assert_eq!(
            args,
            [
                "virt-launcher",
                "--no-emulation",
                "--insecure-registry",
                "localhost:5000"
            ]
        );
    }

    #[test]
    fn the_pod_has_kubevirts_labels_paths_and_grace() {
        let block = ClaimModes::from([("raw-pvc".to_owned(), true)]);
        let pod = launcher_pod(&vmi(VMI), &block, &NetworkResources::new(), &settings());
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["kubevirt.io"], "virt-launcher");
        assert_eq!(labels["kubevirt.io/created-by"], "u-1");
        assert_eq!(labels["app"], "web");
        assert_eq!(
            pod.metadata.generate_name.as_deref(),
            Some("virt-launcher-vm1-")
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("VirtualMachineInstance", Some(true))
        );
        let spec = pod.spec.unwrap();
        assert_eq!(
            spec.node_selector,
            Some(BTreeMap::from([(
                "kubevirt.io/schedulable".into(),
                "true".into()
            )])),
            "only nodes where virt-handler runs"
        );
        assert_eq!(spec.termination_grace_period_seconds, Some(25));
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        let compute = &spec.containers[0];
        assert_eq!(compute.name, "compute");
        assert_eq!(
            compute.args.as_deref().unwrap(),
            ["virt-launcher", "--insecure-registry", "localhost:5000"]
        );
        let mounts: Vec<(&str, &str)> = compute
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| (m.name.as_str(), m.mount_path.as_str()))
            .collect();
        assert_eq!(
            mounts,
            [
                ("sockets", "/var/run/kubevirt/sockets"),
                ("root", "/var/run/kubevirt-private/vmi-disks/root"),
                ("seed", "/var/run/kubevirt-private/secret/seed"),
                ("cfg", "/var/run/kubevirt-private/config-map/cfg"),
            ]
        );
        let devices = compute.volume_devices.as_ref().unwrap();
        assert_eq!(
            (devices[0].name.as_str(), devices[0].device_path.as_str()),
            ("raw", "/dev/raw")
        );
        let claims: Vec<&str> = spec
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.as_str())
            .collect();
        assert_eq!(claims, ["root-dv", "raw-pvc"]);
        let requests = compute
            .resources
            .as_ref()
            .unwrap()
            .requests
            .clone()
            .unwrap();
        assert_eq!(requests["memory"], Quantity("322Mi".into()));
        assert_eq!(requests["cpu"], Quantity("500m".into()));
    }

    #[test]
    fn access_credential_secrets_are_mounted_once_each_as_kubevirt_names_them() {
        let credentials = [
            "  accessCredentials:",
            "  - sshPublicKey: {source: {secret: {secretName: keys}}, propagationMethod: {noCloud: {}}}",
            "  - sshPublicKey: {source: {secret: {secretName: keys}}, propagationMethod: {configDrive: {}}}",
            "  - userPassword: {source: {secret: {secretName: pw}}, propagationMethod: {qemuGuestAgent: {}}}",
        ];
        let with_credentials = format!("{VMI}{}\n", credentials.join("\n"));
        let pod = launcher_pod(
            &vmi(&with_credentials),
            &ClaimModes::new(),
            &NetworkResources::new(),
            &settings(),
        );
        let spec = pod.spec.unwrap();
        let secrets: Vec<(&str, &str)> = spec
            .volumes
            .iter()
            .flatten()
            .filter(|v| v.name.ends_with("-access-cred"))
            .map(|v| {
                (
                    v.name.as_str(),
                    v.secret
                        .as_ref()
                        .and_then(|s| s.secret_name.as_deref())
                        .unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            secrets,
            [("keys-access-cred", "keys"), ("pw-access-cred", "pw")]
        );
        let mount = spec.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "keys-access-cred")
            .expect("mounted");
        assert_eq!(
            (mount.mount_path.as_str(), mount.read_only),
            (
                "/var/run/kubevirt-private/secret/keys-access-cred",
                Some(true)
            )
        );
    }

    #[test]
    fn the_vmis_node_selector_is_kept_beside_kubevirts() {
        let mut v = vmi(VMI);
        v.spec.node_selector = Some(BTreeMap::from([("disk".into(), "ssd".into())]));
        let pod = launcher_pod(
            &v,
            &ClaimModes::new(),
            &NetworkResources::new(),
            &settings(),
        );
        let selector = pod.spec.unwrap().node_selector.unwrap();
        assert_eq!(selector["disk"], "ssd");
        assert_eq!(selector["kubevirt.io/schedulable"], "true");
    }

    #[test]
    fn the_vmis_priority_class_names_the_pods() {
        let classed = vmi(
            "metadata: {name: v, namespace: ns, uid: u}\nspec: {priorityClassName: high, domain: {devices: {}}}",
        );
        let pod = launcher_pod(
            &classed,
            &ClaimModes::new(),
            &NetworkResources::new(),
            &settings(),
        );
        assert_eq!(
            pod.spec.unwrap().priority_class_name.as_deref(),
            Some("high")
        );
        let plain =
            vmi("metadata: {name: v, namespace: ns, uid: u}\nspec: {domain: {devices: {}}}");
        let pod = launcher_pod(
            &plain,
            &ClaimModes::new(),
            &NetworkResources::new(),
            &settings(),
        );
        assert_eq!(pod.spec.unwrap().priority_class_name, None);
    }

    #[test]
    fn default_grace_is_kubevirts_plus_the_pods_margin() {
        let mut v = vmi(VMI);
        v.spec.termination_grace_period_seconds = None;
        let pod = launcher_pod(
            &v,
            &ClaimModes::new(),
            &NetworkResources::new(),
            &settings(),
        );
        assert_eq!(pod.spec.unwrap().termination_grace_period_seconds, Some(45));
    }

    #[test]
    fn secondary_networks_are_annotated_and_their_resources_requested() {
        let mut v = vmi(VMI);
        v.spec.networks = Some(
            serde_json::from_value(serde_json::json!([
                {"name": "default", "pod": {}},
                {"name": "blue", "multus": {"networkName": "br1"}},
                {"name": "red", "multus": {"networkName": "other/br2"}},
            ]))
            .unwrap(),
        );
        v.spec.domain.devices.interfaces = Some(
            serde_json::from_value(serde_json::json!([
                {"name": "default", "masquerade": {}},
                {"name": "blue", "bridge": {}, "macAddress": "02:00:00:00:00:01"},
                {"name": "red", "bridge": {}},
            ]))
            .unwrap(),
        );
        let resources = NetworkResources::from([
            (
                "blue".to_owned(),
                "bridge.network.kubevirt.io/br1".to_owned(),
            ),
            (
                "red".to_owned(),
                "bridge.network.kubevirt.io/br1".to_owned(),
            ),
        ]);
        let pod = launcher_pod(&v, &ClaimModes::new(), &resources, &settings());
        let annotation = &pod.metadata.annotations.unwrap()[NETWORKS_ANNOTATION];
        let selections: serde_json::Value = serde_json::from_str(annotation).unwrap();
        assert_eq!(
            selections,
            serde_json::json!([
                {"name": "br1", "namespace": "ns", "interface": "pod16477688c0e",
                 "mac": "02:00:00:00:00:01"},
                {"name": "br2", "namespace": "other", "interface": pod_interface_name("red")},
            ])
        );
        let compute = &pod.spec.unwrap().containers[0];
        // Two networks on one bridge: two of its resource.
        let wanted = Quantity("2".into());
        let resources = compute.resources.as_ref().unwrap();
        assert_eq!(
            resources.requests.as_ref().unwrap()["bridge.network.kubevirt.io/br1"],
            wanted
        );
        assert_eq!(
            resources.limits.as_ref().unwrap()["bridge.network.kubevirt.io/br1"],
            wanted
        );
    }
}
