//! Both versions' typed HyperConverged keep every field upstream's CRD declares.

use serde_json::{Value, json};

use super::conversion;

/// A v1beta1 HyperConverged setting a field of every object upstream declares.
fn full_v1beta1() -> Value {
    let selector = json!({"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]});
    let placement = json!({"nodeSelector": {"n": "1"}, "tolerations": [{"key": "t", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]}}}});
    let cron = json!({"metadata": {"name": "fedora", "annotations": {"a": "b"}},
        "spec": {"schedule": "0 */12 * * *", "managedDataSource": "fedora", "garbageCollect": "Outdated", "importsToKeep": 2,
                 "template": {"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
                              "spec": {"source": {"registry": {"url": "docker://quay.io/fedora"}}, "storage": {"resources": {"requests": {"storage": "30Gi"}}}}}}});
    let mut spec = json!({
            "CommonInstancetypesDeployment": {"enabled": true},
            "applicationAwareConfig": {"allowApplicationAwareClusterResourceQuota": true, "namespaceSelector": selector, "vmiCalcConfigName": "DedicatedVirtualResources"},
            "certConfig": {"ca": {"duration": "48h0m0s", "renewBefore": "24h0m0s"}, "server": {"duration": "24h0m0s", "renewBefore": "12h0m0s"}},
            "changedBlockTrackingLabelSelectors": {"namespaceLabelSelector": selector, "virtualMachineLabelSelector": selector},
            "commonBootImageNamespace": "images", "commonTemplatesNamespace": "templates",
            "dataImportCronTemplates": [cron],
            "defaultCPUModel": "Haswell", "defaultRuntimeClass": "rc", "deployVmConsoleProxy": true,
            "enableApplicationAwareQuota": true, "enableCommonBootImageImport": false, "evictionStrategy": "LiveMigrate",
            "featureGates": {"alignCPUs": true, "autoResourceLimits": false, "containerPathVolumes": true, "decentralizedLiveMigration": true,
                "declarativeHotplugVolumes": true, "deployKubeSecondaryDNS": true, "deployKubevirtIpamController": false, "deployTektonTaskResources": false,
                "deployVmConsoleProxy": false, "disableMDevConfiguration": true, "downwardMetrics": true, "enableApplicationAwareQuota": false,
                "enableCommonBootImageImport": true, "enableManagedTenantQuota": false, "enableMultiArchBootImageImport": true, "incrementalBackup": true,
                "nonRoot": true, "objectGraph": true, "persistentReservation": true, "primaryUserDefinedNetworkBinding": false, "videoConfig": true,
                "withHostPassthroughCPU": false},
    });
    let more = json!({
            "filesystemOverhead": {"global": "0.08", "storageClass": {"fast": "0.1"}},
            "higherWorkloadDensity": {"memoryOvercommitPercentage": 150},
            "hypervisors": [{"name": "kvm"}],
            "infra": {"nodePlacement": placement}, "workloads": {"nodePlacement": placement},
            "instancetypeConfig": {"referencePolicy": "expand"},
            "ksmConfiguration": {"nodeLabelSelector": selector},
            "kubeMacPoolConfiguration": {"rangeStart": "02:00:00:00:00:00", "rangeEnd": "02:FF:FF:FF:FF:FF"},
    });
    merge(&mut spec, more);
    let more = json!({
            "kubeSecondaryDNSNameServerIP": "10.0.0.10",
            "liveMigrationConfig": {"allowAutoConverge": true, "allowPostCopy": false, "allowWorkloadDisruption": true, "bandwidthPerMigration": "64Mi",
                "completionTimeoutPerGiB": 150, "network": "migration", "parallelMigrationsPerCluster": 5, "parallelOutboundMigrationsPerNode": 2, "progressTimeout": 150},
            "liveUpdateConfiguration": {"maxCpuSockets": 8, "maxGuest": "64Gi", "maxHotplugRatio": 4},
            "localStorageClassName": "local",
            "logVerbosityConfig": {"cdi": 3, "kubevirt": {"nodeVerbosity": {"node01": 4}, "virtAPI": 2, "virtController": 2, "virtHandler": 3,
                "virtLauncher": 4, "virtOperator": 2, "virtSynchronizationController": 1}},
            "mediatedDevicesConfiguration": {"mediatedDeviceTypes": ["nvidia-222"], "mediatedDevicesTypes": ["nvidia-222"],
                "nodeMediatedDeviceTypes": [{"mediatedDeviceTypes": ["nvidia-223"], "nodeSelector": {"gpu": "yes"}}]},
            "networkBinding": {"passt": {"sidecarImage": "quay.io/passt", "networkAttachmentDefinition": "default/passt", "domainAttachmentType": "managedTap",
                "downwardAPI": "device-info", "migration": {"method": "link-refresh"}, "computeResourceOverhead": {"requests": {"memory": "500Mi"}}}},
    });
    merge(&mut spec, more);
    let more = json!({
            "obsoleteCPUs": {"cpuModels": ["486"], "minCPUModel": "Penryn"},
            "permittedHostDevices": {"pciHostDevices": [{"pciDeviceSelector": "10de:1eb8", "resourceName": "nvidia.com/TU104GL", "externalResourceProvider": true}],
                "mediatedDevices": [{"mdevNameSelector": "GRID T4-1Q", "resourceName": "nvidia.com/GRID_T4-1Q", "disabled": false}],
                "usbHostDevices": [{"resourceName": "kubevirt.io/storage", "selectors": [{"vendor": "46f4", "product": "0001"}]}]},
            "resourceRequirements": {"autoCPULimitNamespaceLabelSelector": selector, "vmiCPUAllocationRatio": 10,
                "storageWorkloads": {"limits": {"cpu": "500m"}, "requests": {"memory": "2Gi"}, "claims": [{"name": "c", "request": "r"}]}},
            "roleAggregationStrategy": "Manual", "scratchSpaceStorageClass": "scratch",
            "storageImport": {"insecureRegistries": ["registry.local:5000"]},
            "tektonPipelinesNamespace": "p", "tektonTasksNamespace": "t",
            "tlsSecurityProfile": {"type": "Custom", "custom": {"ciphers": ["ECDHE-RSA-AES128-GCM-SHA256"], "minTLSVersion": "VersionTLS12"}, "old": {}},
            "tuningPolicy": "highBurst", "uninstallStrategy": "RemoveWorkloads", "vddkInitImage": "vddk",
            "virtualMachineOptions": {"disableFreePageReporting": true, "disableSerialConsoleLog": true},
            "vmStateStorageClass": "state",
            "workloadUpdateStrategy": {"batchEvictionInterval": "1m0s", "batchEvictionSize": 10, "workloadUpdateMethods": ["LiveMigrate", "Evict"]},
    });
    merge(&mut spec, more);
    let status = json!({
            "conditions": [{"type": "Available", "status": "True", "reason": "ReconcileCompleted", "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}],
            "dataImportCronTemplates": [{"metadata": {"name": "fedora"}, "spec": cron["spec"],
                "status": {"commonTemplate": true, "modified": false, "originalSupportedArchitectures": "amd64",
                           "conditions": [{"type": "Deployed", "status": "True", "reason": "r", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}],
            "dataImportSchedule": "0 */12 * * *", "infrastructureHighlyAvailable": false,
            "nodeInfo": {"controlPlaneArchitectures": ["amd64"], "defaultWorkloadArchitecture": "amd64", "workloadsArchitectures": ["amd64", "arm64"]},
            "observedGeneration": 2,
            "relatedObjects": [{"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "name": "kubevirt-kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged",
                "resourceVersion": "1", "uid": "u", "fieldPath": "f"}],
            "systemHealthStatus": "healthy",
            "versions": [{"name": "operator", "version": "1.16.0"}],
    });
    json!({
        "apiVersion": conversion::V1BETA1, "kind": "HyperConverged",
        "metadata": {"name": "kubevirt-hyperconverged", "namespace": "kubevirt-hyperconverged"},
        "spec": spec,
        "status": status,
    })
}

/// `into` with the fields of `fields` added.
fn merge(into: &mut Value, fields: Value) {
    if let (Some(into), Value::Object(fields)) = (into.as_object_mut(), fields) {
        into.extend(fields);
    }
}

#[test]
fn every_v1beta1_field_round_trips_through_the_types() {
    let object = full_v1beta1();
    let typed: super::HyperConverged = serde_json::from_value(object.clone()).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), object);
}

#[test]
fn every_v1_field_round_trips_through_the_types() {
    let mut object = conversion::to_v1(&full_v1beta1()).unwrap();
    // What v1 has and v1beta1 cannot say.
    object["spec"]["deployment"]["deployNetworkResourcesInjector"] = json!(false);
    object["spec"]["observability"] = json!({"allowedAlerts": ["a"], "allowedRecordingRules": ["r"],
        "workloads": {"allowedMetrics": ["m"]}});
    object["spec"]["virtualization"]["mediatedDevicesConfiguration"]["enabled"] = json!(true);
    let typed: super::v1::HyperConverged = serde_json::from_value(object.clone()).unwrap();
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(back, object);
    // Every section was filled.
    for section in [
        "deployment",
        "networking",
        "observability",
        "security",
        "storage",
        "virtualization",
        "workloadSources",
    ] {
        assert!(back["spec"][section].is_object(), "{section}");
    }
    let placement = &back["spec"]["deployment"]["nodePlacements"];
    assert_eq!(placement["workload"]["nodeSelector"]["n"], "1");
}
