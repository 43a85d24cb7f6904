//! The instancetype and preference of a VM, as virt-controller finds them
//! (`pkg/instancetype/find`, `revision`): from the revision the VM's status (or a pinned
//! `revisionName`) names, else from the object itself, with a new revision to keep it.
//! [`resolve`] does the reads; what becomes of them (revisions created, the status refs, the
//! instance expanded) is the VM plan's.

pub mod revision;

use api::instancetype::matcher::{Family, Scope};
use api::instancetype::{VirtualMachineInstancetypeSpec, VirtualMachinePreferenceSpec};
use api::kubevirt::VirtualMachine;
use api::kubevirt::vm::{InstancetypeMatcher, InstancetypeStatusRef};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client, ResourceExt};
use serde::de::DeserializeOwned;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// The object a matcher settled on.
#[derive(Clone, Debug, PartialEq)]
pub struct Chosen<S> {
    /// Its spec, from its revision or as read.
    pub spec: S,
    /// The VM's status reference to it.
    pub status_ref: InstancetypeStatusRef,
    /// The revision to create to keep it (none when one already does).
    pub new_revision: Option<ControllerRevision>,
    /// Namespaced or cluster-wide.
    pub scope: Scope,
    /// Its name.
    pub name: String,
}

/// A VM's instancetype and preference, each if it names one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resolved {
    /// `spec.instancetype`'s.
    pub instancetype: Option<Chosen<VirtualMachineInstancetypeSpec>>,
    /// `spec.preference`'s.
    pub preference: Option<Chosen<VirtualMachinePreferenceSpec>>,
}

/// Why a VM's instancetype or preference could not be had: upstream's condition reason
/// and the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// `FailedFindInstancetype`, `FailedFindPreference` or `FailedCreate`.
    pub reason: &'static str,
    /// What went wrong.
    pub message: String,
}

/// Upstream's condition reasons.
pub mod reasons {
    /// The VM's instancetype cannot be found.
    pub const FAILED_FIND_INSTANCETYPE: &str = "FailedFindInstancetype";
    /// The VM's preference cannot be found.
    pub const FAILED_FIND_PREFERENCE: &str = "FailedFindPreference";
}

/// Reads what the VM's matchers name; a revision to make is owned by `owner` (the VM).
pub async fn resolve(
    client: &Client,
    vm: &VirtualMachine,
    owner: &OwnerReference,
) -> Result<Resolved, Failure> {
    let status = vm.status.as_ref();
    let instancetype = match &vm.spec.instancetype {
        Some(m) => Some(
            choose(
                client,
                vm,
                Family::Instancetype,
                owner,
                m,
                status.and_then(|s| s.instancetype_ref.as_ref()),
            )
            .await
            .map_err(|message| Failure {
                reason: reasons::FAILED_FIND_INSTANCETYPE,
                message,
            })?,
        ),
        None => None,
    };
    let preference = match &vm.spec.preference {
        Some(m) => Some(
            choose(
                client,
                vm,
                Family::Preference,
                owner,
                m,
                status.and_then(|s| s.preference_ref.as_ref()),
            )
            .await
            .map_err(|message| Failure {
                reason: reasons::FAILED_FIND_PREFERENCE,
                message,
            })?,
        ),
        None => None,
    };
    Ok(Resolved {
        instancetype,
        preference,
    })
}

async fn choose<S: DeserializeOwned + serde::Serialize>(
    client: &Client,
    vm: &VirtualMachine,
    family: Family,
    owner: &OwnerReference,
    matcher: &InstancetypeMatcher,
    current: Option<&InstancetypeStatusRef>,
) -> Result<Chosen<S>, String> {
    let namespace = vm.namespace().unwrap_or_default();
    let name = matcher
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            format!(
                "the {} names no object (inferFromVolume is resolved when the VM is admitted)",
                family.matcher()
            )
        })?;
    let scope = family.scope(matcher.kind.as_deref())?;
    let mut status_ref = revision::next_ref(matcher, current);
    let revisions = Api::<ControllerRevision>::namespaced(client.clone(), &namespace);
    if let Some(kept) = status_ref
        .controller_revision_ref
        .as_ref()
        .and_then(|r| r.name.clone())
    {
        let stored = revisions.get(&kept).await.map_err(message)?;
        // A revision of another object (the status outlived a rename) is not used.
        let pinned = matcher.revision_name.is_some();
        let same_object = stored.labels().get(revision::labels::OBJECT_NAME) == Some(&name);
        if pinned || same_object {
            return Ok(Chosen {
                spec: revision::spec_of(&stored)?,
                status_ref,
                new_revision: None,
                scope,
                name,
            });
        }
    }
    let object = live(client, family, scope, &namespace, &name).await?;
    let spec = object
        .data
        .get("spec")
        .cloned()
        .ok_or_else(|| format!("{} {name} has no spec", family.kind(scope)))?;
    let spec: S = serde_json::from_value(spec).map_err(|e| e.to_string())?;
    let created = revision::for_object(vm, owner, family.kind(scope), &object.metadata, &spec)
        .map_err(|e| e.to_string())?;
    status_ref.controller_revision_ref = Some(api::kubevirt::vm::ControllerRevisionRef {
        name: created.metadata.name.clone(),
    });
    Ok(Chosen {
        spec,
        status_ref,
        new_revision: Some(created),
        scope,
        name,
    })
}

/// The object itself.
async fn live(
    client: &Client,
    family: Family,
    scope: Scope,
    namespace: &str,
    name: &str,
) -> Result<DynamicObject, String> {
    let kind = family.kind(scope);
    let resource = ApiResource {
        group: api::instancetype::GROUP.into(),
        version: api::instancetype::VERSION.into(),
        api_version: format!(
            "{}/{}",
            api::instancetype::GROUP,
            api::instancetype::VERSION
        ),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    };
    let api: Api<DynamicObject> = match scope {
        Scope::Namespaced => Api::namespaced_with(client.clone(), namespace, &resource),
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    api.get(name).await.map_err(message)
}

/// The API server's message, as upstream puts it in the condition.
fn message(error: kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message,
        other => other.to_string(),
    }
}
