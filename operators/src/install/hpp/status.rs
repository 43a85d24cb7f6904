//! The HostPathProvisioner's status as hostpath-provisioner-operator writes it: the operator
//! SDK conditions (Available, Progressing, Degraded) with its reasons and messages, the
//! versions, and `storagePoolStatuses` sorted by name.

use api::common::{ConditionStatus, operator_condition};
use api::hostpath::{HostPathProvisionerStatus, StoragePoolStatus, pool_phase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::kit::conditions::{self, Heartbeat};

/// Upstream's reason and message of Available once deployed.
pub const HEALTHY_REASON: &str = "Complete";
pub const HEALTHY_MESSAGE: &str = "Application Available";
/// The operator SDK's reason and message while deploying.
pub const DEPLOYING_REASON: &str = "DeployStarted";
pub const DEPLOYING_MESSAGE: &str = "Started Deployment";
/// Upstream's reason when a storage pool cannot be made ready.
pub const POOL_NOT_READY: &str = "StoragePoolNotReady";
/// Upstream's reason when a reconcile fails.
pub const RECONCILE_FAILED: &str = "Reconcile Failed";

/// What a reconcile came to for one CR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every pool the CR names is served.
    Healthy,
    /// On a cluster: the driver's DaemonSet is not ready on every node yet (the operator
    /// SDK's `MarkCrDeploying`).
    Deploying,
    /// Something the CR names is not served; upstream's reason and a message.
    Failed {
        reason: &'static str,
        message: String,
    },
}

/// A path pool that is served.
pub fn ready_pool(name: &str) -> StoragePoolStatus {
    StoragePoolStatus {
        name: name.to_owned(),
        phase: pool_phase::READY.to_owned(),
        ..Default::default()
    }
}

/// The status after a reconcile, with the CR's pool statuses.
pub fn status_for(
    before: Option<&HostPathProvisionerStatus>,
    pools: &[StoragePoolStatus],
    outcome: &Outcome,
    version: &str,
    now: &Time,
) -> HostPathProvisionerStatus {
    let mut status = before.cloned().unwrap_or_default();
    let mut conditions = status.conditions.take().unwrap_or_default();
    use ConditionStatus::{False, True};
    // Available, Progressing and Degraded, each with its reason and message if any.
    let (available, progressing, degraded) = match outcome {
        Outcome::Healthy => {
            status.observed_version = Some(version.to_owned());
            (
                (True, Some((HEALTHY_REASON, HEALTHY_MESSAGE))),
                (False, None),
                (False, None),
            )
        }
        Outcome::Deploying => (
            (False, None),
            (True, Some((DEPLOYING_REASON, DEPLOYING_MESSAGE))),
            (False, None),
        ),
        // Upstream's MarkCrFailedHealing.
        Outcome::Failed { reason, message } => (
            (False, None),
            (True, None),
            (True, Some((*reason, message.as_str()))),
        ),
    };
    let wanted = [available, progressing, degraded];
    let types = [
        operator_condition::AVAILABLE,
        operator_condition::PROGRESSING,
        operator_condition::DEGRADED,
    ];
    for (type_, (condition_status, why)) in types.into_iter().zip(wanted) {
        let (reason, message) = why.unzip();
        // The SDK's conditions, the heartbeat moved only when anything changes (upstream
        // ignores heartbeat-only changes when deciding to write).
        conditions::set(
            &mut conditions,
            type_,
            condition_status,
            reason,
            message,
            Heartbeat::OnChange,
            now,
        );
    }
    let mut pools = pools.to_vec();
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    pools.dedup_by(|a, b| a.name == b.name);
    status.storage_pool_statuses = Some(pools);
    status.conditions = Some(conditions);
    status.operator_version = Some(version.to_owned());
    status.target_version = Some(version.to_owned());
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::common::OperatorCondition;

    fn at(text: &str) -> Time {
        Time(text.parse().unwrap())
    }

    fn find<'a>(status: &'a HostPathProvisionerStatus, type_: &str) -> &'a OperatorCondition {
        let conditions = status.conditions.as_ref().unwrap();
        conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn healthy_pools_are_ready_and_sorted_and_the_cr_available() {
        let now = at("2024-05-01T10:00:00Z");
        let ready = [ready_pool("slow"), ready_pool("fast")];
        let status = status_for(None, &ready, &Outcome::Healthy, "v1", &now);
        let pools = status.storage_pool_statuses.clone().unwrap();
        assert_eq!(pools[0].name, "fast");
        assert_eq!(pools[1].name, "slow");
        assert!(
            pools
                .iter()
                .all(|p| p.phase == "Ready" && p.desired_ready.is_none())
        );
        let available = find(&status, "Available");
        assert_eq!(available.status, ConditionStatus::True);
        assert_eq!(available.reason.as_deref(), Some("Complete"));
        assert_eq!(available.message.as_deref(), Some("Application Available"));
        assert_eq!(find(&status, "Progressing").status, ConditionStatus::False);
        assert_eq!(find(&status, "Degraded").status, ConditionStatus::False);
        assert_eq!(status.observed_version.as_deref(), Some("v1"));
        // The same again later changes nothing: no needless writes.
        let later = at("2024-05-01T11:00:00Z");
        assert_eq!(
            status_for(Some(&status), &ready, &Outcome::Healthy, "v1", &later),
            status
        );
    }

    #[test]
    fn a_pool_that_cannot_be_served_degrades_the_cr() {
        let now = at("2024-05-01T10:00:00Z");
        let healthy = status_for(None, &[ready_pool("a")], &Outcome::Healthy, "v1", &now);
        let later = at("2024-05-01T11:00:00Z");
        let failed = Outcome::Failed {
            reason: POOL_NOT_READY,
            message: "storage pool \"big\": not supported".into(),
        };
        let status = status_for(Some(&healthy), &[ready_pool("a")], &failed, "v1", &later);
        let degraded = find(&status, "Degraded");
        assert_eq!(degraded.status, ConditionStatus::True);
        assert_eq!(degraded.reason.as_deref(), Some("StoragePoolNotReady"));
        assert_eq!(degraded.last_transition_time, Some(later.clone()));
        assert_eq!(find(&status, "Available").status, ConditionStatus::False);
        assert_eq!(find(&status, "Available").reason, None);
        assert_eq!(find(&status, "Progressing").status, ConditionStatus::True);
        assert_eq!(status.storage_pool_statuses.unwrap().len(), 1);
    }
}
