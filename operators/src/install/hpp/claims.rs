//! `pvcTemplate` storage pools on one machine: a claim per node made from the template (as
//! upstream names and labels it), bound on this node (the operator selects the node, as the
//! scheduler would for upstream's pool Deployment), whose volume is mounted at the pool's
//! `path` and served as the pool.

use std::collections::BTreeMap;

use api::hostpath::{ClaimStatus, StoragePool};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The namespace of the pools' claims (upstream's operand namespace).
pub const NAMESPACE: &str = "hostpath-provisioner";
/// Upstream's label naming a claim's pool.
pub const POOL_LABEL: &str = "kubevirt.io.hostpath-provisioner/storagePool";
/// Upstream's app label of everything the operator makes.
pub const APP_LABEL: &str = "k8s-app";
pub const APP: &str = "hostpath-provisioner";
/// The annotation the scheduler sets on a WaitForFirstConsumer claim.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const MAX_NAME_LENGTH: usize = 63;

/// `base-suffix`, shortened with a hash of it to `max` characters when longer, as upstream's
/// `getResourceNameWithMaxLength` keeps names within Kubernetes' limits.
pub fn name_within(base: &str, suffix: &str, max: usize) -> String {
    let name = format!("{base}-{suffix}");
    if name.len() <= max {
        return name;
    }
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let hash = format!("{hash:08x}");
    let keep = max.saturating_sub(hash.len() + 1);
    let prefix: String = name.chars().take(keep).collect();
    format!("{}-{hash}", prefix.trim_end_matches('-'))
}

/// The claim of pool `pool` on node `node`: `hpp-pool-<pool>-<node>`.
pub fn claim_name(pool: &str, node: &str) -> String {
    name_within("hpp-pool", &format!("{pool}-{node}"), MAX_NAME_LENGTH)
}

/// The claim backing templated pool `pool` on `node`, owned by the CR (a pool without a
/// template gets an empty spec: callers only pass templated pools).
pub fn pool_claim(
    pool: &StoragePool,
    node: &str,
    owner: Option<OwnerReference>,
) -> PersistentVolumeClaim {
    let spec = pool.pvc_template.clone().unwrap_or_default();
    let labels = BTreeMap::from([
        (APP_LABEL.to_owned(), APP.to_owned()),
        (
            POOL_LABEL.to_owned(),
            name_within(&pool.name, "hpp", MAX_NAME_LENGTH),
        ),
    ]);
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(claim_name(&pool.name, node)),
            namespace: Some(NAMESPACE.to_owned()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                SELECTED_NODE.to_owned(),
                node.to_owned(),
            )])),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The claim's entry in the pool's `claimStatuses`.
pub fn claim_status(claim: &PersistentVolumeClaim) -> ClaimStatus {
    ClaimStatus {
        name: claim.metadata.name.clone().unwrap_or_default(),
        status: claim.status.clone().unwrap_or_default(),
    }
}

/// Upstream's complaint about a claim that is not bound, or `None` when it is.
pub fn not_bound(claim: &PersistentVolumeClaim) -> Option<String> {
    let phase = claim
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".to_owned());
    (phase != "Bound").then(|| {
        format!(
            "error: Pool PVC {} is {phase} instead of Bound",
            claim.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PersistentVolumeClaimStatus};

    #[test]
    fn claims_are_named_labelled_and_placed_as_upstream() {
        let pool = StoragePool {
            name: "big".into(),
            path: "/var/big".into(),
            pvc_template: Some(PersistentVolumeClaimSpec {
                storage_class_name: Some("local".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let claim = pool_claim(&pool, "node1", None);
        assert_eq!(claim.metadata.name.as_deref(), Some("hpp-pool-big-node1"));
        let labels = claim.metadata.labels.clone().unwrap();
        assert_eq!(labels[POOL_LABEL], "big-hpp");
        assert_eq!(
            claim.metadata.annotations.clone().unwrap()[SELECTED_NODE],
            "node1"
        );
        assert_eq!(
            claim.spec.unwrap().storage_class_name.as_deref(),
            Some("local")
        );
        let long = claim_name(&"p".repeat(60), "node1");
        assert!(
            long.len() <= 63 && long.starts_with("hpp-pool-ppp"),
            "{long}"
        );
        assert_ne!(long, claim_name(&"p".repeat(61), "node1"));
    }

    #[test]
    fn a_claim_not_bound_is_reported_as_upstream() {
        let mut claim = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("hpp-pool-big-n".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            not_bound(&claim).as_deref(),
            Some("error: Pool PVC hpp-pool-big-n is Pending instead of Bound")
        );
        claim.status = Some(PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            ..Default::default()
        });
        assert_eq!(not_bound(&claim), None);
    }
}
