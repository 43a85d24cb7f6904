//! The part of the active KubeVirt CR's `spec.configuration` that virt-api's defaulting and
//! virt-controller's launcher pods read (virt-config's cluster config): the binding of the
//! pod network's default interface, the default machine type, whether guests may run under
//! software emulation, and how many vCPUs share one CPU of the node. Built from the CR as a pure function; who watches the CR
//! keeps the newest where admission reads it ([`SharedClusterConfig`]).

use std::sync::{Arc, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

/// The binding of the interface virt-api adds for the pod network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultBinding {
    Bridge,
    Masquerade,
}

/// What virt-api's defaulting and virt-controller take from the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    pub default_binding: DefaultBinding,
    /// The machine type a VMI that names none gets.
    pub machine_type: String,
    /// `developerConfiguration.useEmulation`: a launcher on a node without usable KVM may
    /// run its guest under TCG; without it, such a VMI fails.
    pub use_emulation: bool,
    /// `developerConfiguration.cpuAllocationRatio`: the vCPUs per node CPU a launcher pod
    /// requests when its VMI asks for no CPU (one vCPU asks for 1/ratio of a CPU).
    pub cpu_allocation_ratio: u32,
    /// `autoCPULimitNamespaceLabelSelector`: a launcher pod in a namespace it selects gets a
    /// CPU limit of one CPU per vCPU (unless its VMI names a limit).
    pub auto_cpu_limit_namespaces: Option<LabelSelector>,
    /// `developerConfiguration.featureGates`: what virt-api admits of the gated features.
    pub feature_gates: Vec<String>,
}

/// virt-config's default CPU allocation ratio.
pub const DEFAULT_CPU_ALLOCATION_RATIO: u32 = 10;

/// virt-config's default machine type on amd64.
const DEFAULT_MACHINE_TYPE: &str = "q35";

impl Default for ClusterConfig {
    /// With no KubeVirt CR (a bare `ferrovirt up`): as HCO configures KubeVirt there:
    /// masquerade, because a bridge on the pod network of one machine has no node bridge
    /// behind it, and emulation allowed, because one machine's KVM may be missing or slow.
    fn default() -> Self {
        ClusterConfig {
            default_binding: DefaultBinding::Masquerade,
            machine_type: DEFAULT_MACHINE_TYPE.into(),
            use_emulation: true,
            cpu_allocation_ratio: DEFAULT_CPU_ALLOCATION_RATIO,
            auto_cpu_limit_namespaces: None,
            feature_gates: Vec::new(),
        }
    }
}

impl ClusterConfig {
    /// The configuration of the KubeVirt CR `kubevirt`, with virt-config's defaults for
    /// what it leaves out (the bridge binding; q35). The architecture's machine type wins
    /// over the deprecated top-level `machineType`, as in virt-config.
    pub fn from_kubevirt(kubevirt: &Value) -> Self {
        let configuration = &kubevirt["spec"]["configuration"];
        let default_binding = match configuration["network"]["defaultNetworkInterface"].as_str() {
            Some("masquerade") => DefaultBinding::Masquerade,
            _ => DefaultBinding::Bridge,
        };
        let machine_type = [
            &configuration["architectureConfiguration"]["amd64"]["machineType"],
            &configuration["machineType"],
        ]
        .into_iter()
        .filter_map(Value::as_str)
        .find(|t| !t.is_empty())
        .unwrap_or(DEFAULT_MACHINE_TYPE)
        .to_owned();
        ClusterConfig {
            default_binding,
            machine_type,
            use_emulation: configuration["developerConfiguration"]["useEmulation"] == true,
            cpu_allocation_ratio: configuration["developerConfiguration"]["cpuAllocationRatio"]
                .as_u64()
                .and_then(|r| u32::try_from(r).ok())
                .filter(|r| *r > 0)
                .unwrap_or(DEFAULT_CPU_ALLOCATION_RATIO),
            // A selector apimachinery refuses selects nothing, as KubeVirt then has none.
            auto_cpu_limit_namespaces: serde_json::from_value::<Option<LabelSelector>>(
                configuration["autoCPULimitNamespaceLabelSelector"].clone(),
            )
            .ok()
            .flatten()
            .filter(crate::label_selector::is_valid),
            feature_gates: feature_gates(kubevirt),
        }
    }
}

/// The feature gates the KubeVirt CR `kubevirt` turns on.
pub fn feature_gates(kubevirt: &Value) -> Vec<String> {
    kubevirt["spec"]["configuration"]["developerConfiguration"]["featureGates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// The cluster config as the watcher of KubeVirt CRs last saw it, read by admission and by
/// virt-controller.
#[derive(Clone, Debug, Default)]
pub struct SharedClusterConfig(Arc<RwLock<ClusterConfig>>);

impl SharedClusterConfig {
    pub fn get(&self) -> ClusterConfig {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the config; returns whether it changed.
    pub fn set(&self, config: ClusterConfig) -> bool {
        let mut current = self.0.write().unwrap_or_else(|e| e.into_inner());
        let changed = *current != config;
        *current = config;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_kubevirt_without_configuration_gets_virt_configs_defaults() {
        let config = ClusterConfig::from_kubevirt(&json!({"spec": {}}));
        assert_eq!(config.default_binding, DefaultBinding::Bridge);
        assert_eq!(config.machine_type, "q35");
        assert!(
            !config.use_emulation,
            "virt-config's default is no emulation"
        );
    }

    #[test]
    fn feature_gates_are_read_from_the_developer_configuration() {
        let kv = json!({"spec": {"configuration": {"developerConfiguration": {"featureGates": ["VideoConfig", 3]}}}});
        assert_eq!(feature_gates(&kv), ["VideoConfig"]);
        assert_eq!(
            ClusterConfig::from_kubevirt(&kv).feature_gates,
            ["VideoConfig"]
        );
        assert!(feature_gates(&json!({})).is_empty());
    }

    #[test]
    fn the_cpu_allocation_ratio_is_read_from_the_developer_configuration() {
        let ratio = |value: serde_json::Value| {
            let kv = json!({"spec": {"configuration": {"developerConfiguration": {"cpuAllocationRatio": value}}}});
            ClusterConfig::from_kubevirt(&kv).cpu_allocation_ratio
        };
        assert_eq!(ratio(json!(4)), 4);
        assert_eq!(ratio(json!(0)), 10, "not positive: virt-config's default");
        assert_eq!(ratio(json!("4")), 10);
        assert_eq!(
            ClusterConfig::from_kubevirt(&json!({"spec": {}})).cpu_allocation_ratio,
            10
        );
    }

    #[test]
    fn the_auto_cpu_limit_selector_is_read_from_the_configuration() {
        let kv = json!({"spec": {"configuration": {
            "autoCPULimitNamespaceLabelSelector": {"matchLabels": {"autoCpuLimit": "true"}}}}});
        let selector = ClusterConfig::from_kubevirt(&kv).auto_cpu_limit_namespaces;
        assert_eq!(
            selector.and_then(|s| s.match_labels),
            Some([("autoCpuLimit".to_owned(), "true".to_owned())].into())
        );
        let none = ClusterConfig::from_kubevirt(&json!({"spec": {}}));
        assert!(none.auto_cpu_limit_namespaces.is_none());
    }

    #[test]
    fn use_emulation_is_read_from_the_developer_configuration() {
        let kv =
            json!({"spec": {"configuration": {"developerConfiguration": {"useEmulation": true}}}});
        assert!(ClusterConfig::from_kubevirt(&kv).use_emulation);
        let off = json!({"spec": {"configuration": {"developerConfiguration": {"useEmulation": "true"}}}});
        assert!(
            !ClusterConfig::from_kubevirt(&off).use_emulation,
            "only a boolean true"
        );
        assert!(
            ClusterConfig::default().use_emulation,
            "a bare ferrovirt up allows it"
        );
    }

    #[test]
    fn the_architectures_machine_type_wins_over_the_deprecated_one() {
        let kv = json!({"spec": {"configuration": {
            "machineType": "pc-q35-rhel8.6.0",
            "architectureConfiguration": {"amd64": {"machineType": "pc"}},
            "network": {"defaultNetworkInterface": "masquerade"},
        }}});
        let config = ClusterConfig::from_kubevirt(&kv);
        assert_eq!(config.machine_type, "pc");
        assert_eq!(config.default_binding, DefaultBinding::Masquerade);
        let deprecated = json!({"spec": {"configuration": {"machineType": "pc-i440fx-9.0"}}});
        assert_eq!(
            ClusterConfig::from_kubevirt(&deprecated).machine_type,
            "pc-i440fx-9.0"
        );
    }

    #[test]
    fn the_shared_config_says_when_it_changed() {
        let shared = SharedClusterConfig::default();
        assert!(!shared.set(ClusterConfig::default()));
        let pc = ClusterConfig {
            machine_type: "pc".into(),
            ..Default::default()
        };
        assert!(shared.set(pc.clone()));
        assert_eq!(shared.get(), pc);
    }
}
