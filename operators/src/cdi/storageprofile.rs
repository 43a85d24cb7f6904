//! The StorageProfile controller: one StorageProfile per StorageClass, named after it, whose
//! status tells the DataVolume controller which access modes, volume modes and clone strategy
//! work on that class (CDI's storageprofile-controller). Known provisioners get their claim
//! property sets; `spec` overrides what is detected.

use std::sync::Arc;
use std::time::Duration;

use api::cdi::storageprofile::{CdiCloneStrategy, ClaimPropertySet};
use api::cdi::{StorageProfile, StorageProfileSpec, StorageProfileStatus};
use futures_util::StreamExt;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::PostParams;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};

use crate::kit::patch_status;

/// Provisioners whose volumes Ferrovirt knows: the hostpath CSI driver (ours and HPP's).
pub const HOSTPATH_PROVISIONERS: [&str; 2] = [
    "kubevirt.io.hostpath-provisioner",
    "kubevirt.io/hostpath-provisioner",
];

/// Errors of the StorageProfile controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("API call failed: {0}")]
    Kube(#[from] kube::Error),
}

struct Context {
    client: Client,
}

/// The claim property sets and clone strategy CDI uses for a provisioner, if it knows it.
pub fn known_capabilities(provisioner: &str) -> Option<(Vec<ClaimPropertySet>, CdiCloneStrategy)> {
    if HOSTPATH_PROVISIONERS.contains(&provisioner) {
        let rwo = |mode: &str| ClaimPropertySet {
            access_modes: vec!["ReadWriteOnce".to_string()],
            volume_mode: Some(mode.to_string()),
        };
        return Some((
            vec![rwo("Filesystem"), rwo("Block")],
            CdiCloneStrategy::CsiClone,
        ));
    }
    None
}

/// The status of the StorageProfile of `class`: the spec's overrides, else what is known of
/// the provisioner, else nothing (the DataVolume controller then falls back to
/// ReadWriteOnce/Filesystem and host-assisted copy).
pub fn desired_status(class: &StorageClass, spec: &StorageProfileSpec) -> StorageProfileStatus {
    let known = known_capabilities(&class.provisioner);
    let claim_property_sets = spec
        .claim_property_sets
        .clone()
        .filter(|sets| !sets.is_empty())
        .or_else(|| known.as_ref().map(|(sets, _)| sets.clone()));
    let clone_strategy = spec
        .clone_strategy
        .or(known.as_ref().map(|(_, strategy)| *strategy))
        .or(Some(CdiCloneStrategy::Copy));
    StorageProfileStatus {
        storage_class: Some(class.name_any()),
        provisioner: Some(class.provisioner.clone()),
        clone_strategy,
        claim_property_sets,
        data_import_cron_source_format: spec.data_import_cron_source_format,
        snapshot_class: spec.snapshot_class.clone(),
    }
}

/// A new, empty StorageProfile for `class`, owned by it so it goes when the class goes.
pub fn new_profile(class: &StorageClass) -> StorageProfile {
    let mut profile = StorageProfile::new(&class.name_any(), StorageProfileSpec::default());
    if let Some(owner) = class.owner_ref(&()) {
        profile.metadata.owner_references = Some(vec![owner]);
    }
    profile
}

async fn reconcile(class: Arc<StorageClass>, ctx: Arc<Context>) -> Result<Action, Error> {
    let profiles: Api<StorageProfile> = Api::all(ctx.client.clone());
    let name = class.name_any();
    let profile = match profiles.get_opt(&name).await? {
        Some(profile) => profile,
        None => {
            tracing::info!(storage_class = %name, "creating StorageProfile");
            match profiles
                .create(&PostParams::default(), &new_profile(&class))
                .await
            {
                Ok(profile) => profile,
                // Created meanwhile (another replica or a user): reconcile again.
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    return Ok(Action::requeue(Duration::from_secs(1)));
                }
                Err(err) => return Err(err.into()),
            }
        }
    };
    let status = desired_status(&class, &profile.spec);
    if profile.status.as_ref() != Some(&status) {
        patch_status(&profiles, &name, &status).await?;
    }
    Ok(Action::requeue(Duration::from_secs(600)))
}

fn error_policy(class: Arc<StorageClass>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(storage_class = %class.name_any(), %err, "StorageProfile reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the StorageProfile controller until its watches end.
pub async fn run(client: Client) {
    let classes: Api<StorageClass> = Api::all(client.clone());
    let profiles: Api<StorageProfile> = Api::all(client.clone());
    let ctx = Arc::new(Context { client });
    Controller::new(classes, watcher::Config::default())
        .owns(profiles, watcher::Config::default())
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(%err, "StorageProfile controller event");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(provisioner: &str) -> StorageClass {
        StorageClass {
            metadata: kube::api::ObjectMeta {
                name: Some("sc".into()),
                uid: Some("uid-sc".into()),
                ..Default::default()
            },
            provisioner: provisioner.into(),
            ..Default::default()
        }
    }

    #[test]
    fn hostpath_classes_get_filesystem_and_block_and_csi_clone() {
        let status = desired_status(
            &class("kubevirt.io.hostpath-provisioner"),
            &StorageProfileSpec::default(),
        );
        let sets = status.claim_property_sets.expect("claim property sets");
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0].access_modes, vec!["ReadWriteOnce"]);
        assert_eq!(sets[0].volume_mode.as_deref(), Some("Filesystem"));
        assert_eq!(sets[1].volume_mode.as_deref(), Some("Block"));
        assert_eq!(status.clone_strategy, Some(CdiCloneStrategy::CsiClone));
        assert_eq!(status.storage_class.as_deref(), Some("sc"));
        assert_eq!(
            status.provisioner.as_deref(),
            Some("kubevirt.io.hostpath-provisioner")
        );
    }

    #[test]
    fn unknown_provisioners_have_no_sets_and_copy_and_spec_overrides() {
        let status = desired_status(&class("example.com/nfs"), &StorageProfileSpec::default());
        assert_eq!(status.claim_property_sets, None);
        assert_eq!(status.clone_strategy, Some(CdiCloneStrategy::Copy));
        let spec = StorageProfileSpec {
            claim_property_sets: Some(vec![ClaimPropertySet {
                access_modes: vec!["ReadWriteMany".into()],
                volume_mode: Some("Block".into()),
            }]),
            clone_strategy: Some(CdiCloneStrategy::Snapshot),
            ..Default::default()
        };
        let status = desired_status(&class("kubevirt.io.hostpath-provisioner"), &spec);
        assert_eq!(status.claim_property_sets, spec.claim_property_sets);
        assert_eq!(status.clone_strategy, Some(CdiCloneStrategy::Snapshot));
    }

    #[test]
    fn new_profiles_are_named_and_owned_by_their_class() {
        let profile = new_profile(&class("x"));
        assert_eq!(profile.name_any(), "sc");
        let owners = profile.metadata.owner_references.expect("owner");
        assert_eq!(owners[0].kind, "StorageClass");
        assert_eq!(owners[0].uid, "uid-sc");
    }
}
