//! Round trips of a KubeVirt CR naming every field upstream declares, and the schema's
//! refusal of names it does not.

use kube::CustomResourceExt;
use serde_json::{Value, json};

use crate::kubevirt::KubeVirt;

fn rate_limited() -> Value {
    json!({"restClient": {"rateLimiter": {"tokenBucketRateLimiter": {"qps": 5.5, "burst": 10}}}})
}

fn arch(machine: &str) -> Value {
    json!({"emulatedMachines": ["q35*", "pc-q35*"], "machineType": machine, "ovmfPath": "/usr/share/OVMF"})
}

fn configuration() -> Value {
    json!({
        "additionalGuestMemoryOverheadRatio": "1.5",
        "apiConfiguration": rate_limited(),
        "architectureConfiguration": {
            "amd64": arch("q35"), "arm64": arch("virt"), "ppc64le": arch("pseries"),
            "defaultArchitecture": "amd64",
        },
        "autoCPULimitNamespaceLabelSelector": {"matchLabels": {"cpu-limits": "true"}},
        "commonInstancetypesDeployment": {"enabled": false},
        "controllerConfiguration": rate_limited(),
        "cpuModel": "Haswell",
        "cpuRequest": "100m",
        "defaultRuntimeClass": "kata",
        "developerConfiguration": {
            "clusterProfiler": true, "cpuAllocationRatio": 10,
            "diskVerification": {"memoryLimit": "2Gi"},
            "featureGates": ["Snapshot"],
            "logVerbosity": {
                "nodeVerbosity": {"node01": 4}, "virtAPI": 1, "virtController": 2,
                "virtHandler": 3, "virtLauncher": 4, "virtOperator": 5,
                "virtSynchronizationController": 6,
            },
            "memoryOvercommit": 150, "minimumClusterTSCFrequency": 2_000_000_000_i64,
            "minimumReservePVCBytes": 131_072, "nodeSelectors": {"kvm": "true"},
            "pvcTolerateLessSpaceUpToPercent": 10, "useEmulation": true,
        },
        "emulatedMachines": ["q35*"],
        "evictionStrategy": "LiveMigrate",
        "handlerConfiguration": rate_limited(),
        "imagePullPolicy": "IfNotPresent",
        "instancetype": {"referencePolicy": "expand"},
        "ksmConfiguration": {"nodeLabelSelector": {"matchLabels": {"ksm": "on"}}},
        "liveUpdateConfiguration": {"maxCpuSockets": 8, "maxGuest": "16Gi", "maxHotplugRatio": 4},
        "machineType": "q35",
        "mediatedDevicesConfiguration": {
            "mediatedDeviceTypes": ["nvidia-222"], "mediatedDevicesTypes": ["nvidia-223"],
            "nodeMediatedDeviceTypes": [{
                "mediatedDeviceTypes": ["nvidia-224"], "mediatedDevicesTypes": ["nvidia-225"],
                "nodeSelector": {"gpu": "a"},
            }],
        },
        "memBalloonStatsPeriod": 10,
        "migrations": {
            "allowAutoConverge": true, "allowPostCopy": false, "allowWorkloadDisruption": true,
            "bandwidthPerMigration": "64Mi", "completionTimeoutPerGiB": 150, "disableTLS": false,
            "matchSELinuxLevelOnMigration": true, "network": "migration-net",
            "nodeDrainTaintKey": "kubevirt.io/drain", "parallelMigrationsPerCluster": 5,
            "parallelOutboundMigrationsPerNode": 2, "progressTimeout": 150,
            "unsafeMigrationOverride": false,
        },
        "minCPUModel": "Penryn",
        "network": {
            "binding": {"passt": {
                "computeResourceOverhead": {"requests": {"memory": "500Mi"}, "limits": {"cpu": "1"}},
                "domainAttachmentType": "managedTap", "downwardAPI": "device-info",
                "migration": {"method": "link-refresh"},
                "networkAttachmentDefinition": "default/passt",
                "sidecarImage": "quay.io/kubevirt/passt-sidecar",
            }},
            "defaultNetworkInterface": "masquerade",
            "permitBridgeInterfaceOnPodNetwork": false, "permitSlirpInterface": false,
        },
        "obsoleteCPUModels": {"486": true, "pentium": false},
        "ovmfPath": "/usr/share/OVMF",
        "permittedHostDevices": {
            "mediatedDevices": [{"mdevNameSelector": "GRID T4-1Q", "resourceName": "nvidia.com/T4", "externalResourceProvider": true}],
            "pciHostDevices": [{"pciVendorSelector": "10DE:1EB8", "resourceName": "nvidia.com/TU104GL"}],
            "usb": [{"resourceName": "kubevirt.io/storage", "selectors": [{"vendor": "46f4", "product": "0001"}]}],
        },
        "seccompConfiguration": {"virtualMachineInstanceProfile": {"customProfile": {
            "localhostProfile": "kubevirt/kubevirt.json", "runtimeDefaultProfile": false,
        }}},
        "selinuxLauncherType": "virt_launcher.process",
        "smbios": {"family": "KubeVirt", "manufacturer": "KubeVirt", "product": "None", "sku": "1", "version": "1.0"},
        "supportContainerResources": [{"type": "hotplug-disk", "resources": {"requests": {"cpu": "10m"}}}],
        "supportedGuestAgentVersions": ["4.*", "5.*"],
        "tlsConfiguration": {"ciphers": ["TLS_AES_128_GCM_SHA256"], "minTLSVersion": "VersionTLS12"},
        "virtualMachineInstancesPerNode": 110,
        "virtualMachineOptions": {"disableFreePageReporting": {}, "disableSerialConsoleLog": {}},
        "vmRolloutStrategy": "LiveUpdate",
        "vmStateStorageClass": "local",
        "webhookConfiguration": rate_limited(),
    })
}

fn component(replicas: i32) -> Value {
    json!({"replicas": replicas, "nodePlacement": {
        "nodeSelector": {"role": "infra"},
        "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}],
        }}},
    }})
}

fn cert(duration: &str) -> Value {
    json!({"duration": duration, "renewBefore": "12h0m0s"})
}

fn kubevirt() -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
        "spec": {
            "certificateRotateStrategy": {"selfSigned": {
                "ca": cert("168h0m0s"), "server": cert("24h0m0s"),
                "caOverlapInterval": "24h", "caRotateInterval": "168h", "certRotateInterval": "24h",
            }},
            "configuration": configuration(),
            "customizeComponents": {
                "flags": {"api": {"v": "4"}, "controller": {"v": "3"}, "handler": {"v": "2"}},
                "patches": [{"resourceName": "virt-api", "resourceType": "Deployment",
                             "patch": "{\"spec\":{\"replicas\":3}}", "type": "strategic"}],
            },
            "imagePullPolicy": "Always",
            "imagePullSecrets": [{"name": "pull"}],
            "imageRegistry": "quay.io/kubevirt",
            "imageTag": "v1.6.6",
            "infra": component(2),
            "monitorAccount": "prometheus-k8s",
            "monitorNamespace": "openshift-monitoring",
            "productComponent": "compute",
            "productName": "ferrovirt",
            "productVersion": "1.0",
            "serviceMonitorNamespace": "monitoring",
            "synchronizationPort": "9185",
            "uninstallStrategy": "BlockUninstallIfWorkloadsExist",
            "workloadUpdateStrategy": {
                "batchEvictionInterval": "1m0s", "batchEvictionSize": 10,
                "workloadUpdateMethods": ["LiveMigrate", "Evict"],
            },
            "workloads": component(1),
        },
        "status": {
            "conditions": [{"type": "Available", "status": "True", "reason": "AllComponentsReady",
                            "message": "All components are ready.",
                            "lastProbeTime": "2026-01-01T00:00:00Z",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "defaultArchitecture": "amd64",
            "generations": [{"group": "apps", "resource": "deployments", "name": "virt-api",
                             "namespace": "kubevirt", "lastGeneration": 3, "hash": "abc"}],
            "observedDeploymentConfig": "{}", "observedDeploymentID": "a1",
            "observedGeneration": 4, "observedKubeVirtRegistry": "quay.io/kubevirt",
            "observedKubeVirtVersion": "v1.6.6", "operatorVersion": "v1.6.6",
            "outdatedVirtualMachineInstanceWorkloads": 0, "phase": "Deployed",
            "synchronizationAddresses": ["10.0.0.1:9185"],
            "targetDeploymentConfig": "{}", "targetDeploymentID": "a1",
            "targetKubeVirtRegistry": "quay.io/kubevirt", "targetKubeVirtVersion": "v1.6.6",
        },
    })
}

#[test]
fn every_upstream_field_round_trips() {
    let original = kubevirt();
    let typed: KubeVirt = serde_json::from_value(original.clone()).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), original);
}

#[test]
fn typed_fields_carry_the_values() {
    let typed: KubeVirt = serde_json::from_value(kubevirt()).unwrap();
    let configuration = typed.spec.configuration.unwrap();
    let obsolete = configuration.obsolete_cpu_models.unwrap();
    assert_eq!(obsolete.get("486"), Some(&true));
    assert_eq!(obsolete.get("pentium"), Some(&false));
    let network = configuration.network.unwrap();
    assert_eq!(
        network.default_network_interface.as_deref(),
        Some("masquerade")
    );
    let infra = typed.spec.infra.unwrap();
    assert_eq!(infra.replicas, Some(2));
    let tolerations = infra.node_placement.unwrap().tolerations.unwrap();
    assert_eq!(tolerations[0].key.as_deref(), Some("infra"));
}

/// The object schema at `path` (property names) under the CRD's first version.
fn schema_at<'a>(crd: &'a Value, path: &[&str]) -> &'a Value {
    let root = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    path.iter()
        .fold(root, |schema, name| &schema["properties"][*name])
}

#[test]
fn the_schema_declares_the_configuration_and_keeps_nothing_unknown() {
    let crd = serde_json::to_value(KubeVirt::crd()).unwrap();
    for path in [
        &["spec"][..],
        &["spec", "configuration"],
        &["spec", "configuration", "developerConfiguration"],
        &["spec", "infra"],
        &["spec", "workloads"],
        &["status"],
    ] {
        let schema = schema_at(&crd, path);
        assert!(
            schema["properties"].is_object(),
            "{path:?} has no properties"
        );
        assert!(
            schema.get("x-kubernetes-preserve-unknown-fields").is_none(),
            "{path:?} keeps unknown fields"
        );
    }
    let configuration = schema_at(&crd, &["spec", "configuration"]);
    assert!(configuration["properties"]["obsoleteCPUModels"].is_object());
    assert!(configuration["properties"]["obsoleteCpuModels"].is_null());
}
