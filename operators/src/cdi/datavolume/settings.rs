//! The cluster configuration a DataVolume's PVC and worker pods depend on (its StorageClass,
//! StorageProfile and CDIConfig) and what it says: filesystem overhead, preallocation,
//! insecure registries, waiting for the first consumer.

use api::cdi::operator::CDI;
use api::cdi::operator::DEFAULT_FILESYSTEM_OVERHEAD;
use api::cdi::{CDIConfig, DataVolume, StorageProfile};
use api::common::NodePlacement;
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;

/// CDIConfig feature gate under which DataVolumes wait for their first consumer.
const HONOR_WAIT_FOR_FIRST_CONSUMER: &str = "HonorWaitForFirstConsumer";

/// The name of the cluster's CDIConfig.
pub const CDI_CONFIG: &str = "config";

/// The cluster configuration a DataVolume's PVC and pods depend on.
#[derive(Clone, Debug, Default)]
pub struct ClusterSettings {
    /// The PVC's StorageClass (named, or the default one).
    pub class: Option<StorageClass>,
    /// The StorageProfile of that class.
    pub profile: Option<StorageProfile>,
    /// The cluster's CDIConfig.
    pub config: Option<CDIConfig>,
    /// Where worker pods run: the active CDI CR's `spec.workload` (anywhere without one).
    pub workload: NodePlacement,
}

impl ClusterSettings {
    /// The fraction of a filesystem volume kept for its metadata.
    pub fn overhead(&self) -> f64 {
        let class = self.class.as_ref().map(|c| c.name_any());
        self.overhead_of(class.as_deref())
    }

    /// The fraction of a filesystem volume of StorageClass `class` kept for its metadata
    /// (CDIConfig's figure for that class, else its global one).
    pub fn overhead_of(&self, class: Option<&str>) -> f64 {
        let from = |o: &api::cdi::operator::FilesystemOverhead| {
            class
                .and_then(|c| o.storage_class.as_ref()?.get(c).cloned())
                .or(o.global.clone())
        };
        let config = self.config.as_ref();
        config
            .and_then(|c| {
                c.status
                    .as_ref()?
                    .filesystem_overhead
                    .as_ref()
                    .and_then(from)
            })
            .or_else(|| config.and_then(|c| c.spec.filesystem_overhead.as_ref().and_then(from)))
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| (0.0..1.0).contains(v))
            .unwrap_or_else(|| DEFAULT_FILESYSTEM_OVERHEAD.parse().unwrap_or(0.06))
    }

    /// The resources of a worker pod's container, as CDIConfig's status gives them.
    pub fn pod_resources(&self) -> Option<&ResourceRequirements> {
        self.config
            .as_ref()?
            .status
            .as_ref()?
            .default_pod_resource_requirements
            .as_ref()
    }

    /// Whether the DataVolume's image is preallocated.
    pub fn preallocation(&self, dv: &DataVolume) -> bool {
        dv.spec
            .preallocation
            .or_else(|| self.config.as_ref()?.spec.preallocation)
            .unwrap_or(false)
    }

    /// Whether the source at `endpoint` is an insecure registry.
    pub fn insecure(&self, endpoint: Option<&str>) -> bool {
        endpoint.is_some_and(|e| is_insecure_registry(self.config.as_ref(), e))
    }

    /// Whether the DataVolume waits for a consumer instead of binding through its worker pod:
    /// as CDI, only with CDIConfig's `HonorWaitForFirstConsumer` feature gate on a
    /// WaitForFirstConsumer class. Without the gate the worker pod is the first consumer.
    pub fn wait_for_first_consumer(&self) -> bool {
        let honored = self
            .config
            .as_ref()
            .and_then(|c| c.spec.feature_gates.as_ref())
            .is_some_and(|gates| gates.iter().any(|g| g == HONOR_WAIT_FOR_FIRST_CONSUMER));
        honored
            && self
                .class
                .as_ref()
                .and_then(|c| c.volume_binding_mode.as_deref())
                .is_some_and(|m| m == "WaitForFirstConsumer")
    }
}

/// Whether CDIConfig `spec.insecureRegistries` lists the host of `endpoint`
/// (`docker://host:port/repo:tag`): plain HTTP or an unverified certificate is allowed there.
pub fn is_insecure_registry(config: Option<&CDIConfig>, endpoint: &str) -> bool {
    let host = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    config
        .and_then(|c| c.spec.insecure_registries.as_ref())
        .is_some_and(|r| r.iter().any(|h| h == host))
}

/// More than one CDI CR is active: CDI's controllers refuse to guess which one places the
/// worker pods, and retry until CDI's operator has put all but one in `Error`.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("number of active CDI CRs > 1")]
pub struct TooManyActiveCdis;

/// The workload placement of the active CDI CR among `crs` (those not in phase `Error`, as
/// CDI's operator marks every CR but the first). With none (a single machine without a CDI
/// CR) worker pods run anywhere.
pub fn workload_placement(crs: &[CDI]) -> Result<NodePlacement, TooManyActiveCdis> {
    let phase = |cr: &CDI| cr.status.as_ref().and_then(|s| s.phase.clone());
    let active: Vec<&CDI> = crs
        .iter()
        .filter(|cr| phase(cr).as_deref() != Some("Error"))
        .collect();
    match active.as_slice() {
        [] => Ok(NodePlacement::default()),
        [cr] => Ok(cr.spec.workload.clone().unwrap_or_default()),
        _ => Err(TooManyActiveCdis),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cdi(name: &str, phase: Option<&str>, selector: &str) -> CDI {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDI",
            "metadata": {"name": name},
            "spec": {"workload": {"nodeSelector": {"pick": selector}}},
            "status": {"phase": phase},
        }))
        .expect("a CDI")
    }

    fn picked(crs: &[CDI]) -> Result<Option<String>, TooManyActiveCdis> {
        Ok(workload_placement(crs)?
            .node_selector
            .and_then(|selector| selector.get("pick").cloned()))
    }

    #[test]
    fn worker_pods_follow_the_active_cdi_crs_workload() {
        assert_eq!(picked(&[]), Ok(None), "no CR: anywhere");
        let unwanted = [cdi("cdi", Some("Error"), "a")];
        assert_eq!(picked(&unwanted), Ok(None), "no active CR: anywhere");
        let second = [
            cdi("cdi", Some("Deployed"), "a"),
            cdi("other", Some("Error"), "b"),
        ];
        assert_eq!(picked(&second), Ok(Some("a".into())));
        let undecided = [cdi("cdi", Some("Deployed"), "a"), cdi("other", None, "b")];
        assert_eq!(
            picked(&undecided),
            Err(TooManyActiveCdis),
            "two active CRs: neither is the CDI"
        );
    }
}
