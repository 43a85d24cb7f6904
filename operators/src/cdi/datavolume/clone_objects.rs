//! The names and shapes of what a clone adds beside its DataVolume, as plain values: the
//! DataVolume's cross-namespace finalizer, the temporary claim (or snapshot restore claim) in
//! the source namespace, and the client name a host-assisted clone's upload server requires.
//! The plan decides with them; [`super::cross_namespace`] and [`super::host_clone`] act on
//! them through the API.

use api::cdi::DataVolume;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, TypedLocalObjectReference,
};
use kube::ResourceExt;
use kube::api::ObjectMeta;

use super::keys::CDI_LABEL;
use super::pod::clone_client_name;

/// DataVolume finalizer: a temporary claim, a volume handed to a target claim not yet
/// bound, or a host-assisted clone's source pod in the source namespace may be left to
/// clean up (Ferrovirt's: nothing else in the target namespace can own those).
pub const FINALIZER: &str = "cdi.kubevirt.io/crossNamespaceClone";

/// The temporary claim of DataVolume `uid`, in the source namespace.
pub fn temporary_claim_name(dv_uid: &str) -> String {
    format!("cdi-tmp-{dv_uid}")
}

/// The common name the target's upload server requires of its client.
pub fn client_name(source: (&str, &str), target: &PersistentVolumeClaim) -> String {
    clone_client_name(
        source,
        (&target.namespace().unwrap_or_default(), &target.name_any()),
    )
}

/// Why a host-assisted clone cannot run without the upload client CA.
pub const NO_CLIENT_CA: &str = "a host-assisted clone needs the upload client CA to sign its source pod's certificate, and this controller has none (`ferrovirt up` keeps one)";

/// The restore claim's name: the cross-namespace clone's temporary claim's, so that its
/// clean-up on deletion covers both.
pub fn restore_claim_name(dv: &DataVolume) -> String {
    temporary_claim_name(dv.metadata.uid.as_deref().unwrap_or_default())
}

/// The claim a VolumeSnapshot is restored into to be copied, in the snapshot's namespace and
/// of its source claim's class and mode (CDI's host-assisted fallback of a snapshot clone),
/// shaped like the claim it was taken of.
pub fn restore_claim_for(
    dv: &DataVolume,
    snapshot: (&str, &str),
    source: &PersistentVolumeClaim,
) -> PersistentVolumeClaim {
    let name = restore_claim_name(dv);
    let spec = source.spec.clone().unwrap_or_default();
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(snapshot.0.to_string()),
            labels: Some([(CDI_LABEL.0.to_string(), CDI_LABEL.1.to_string())].into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: spec.access_modes,
            volume_mode: spec.volume_mode,
            storage_class_name: spec.storage_class_name,
            resources: spec.resources,
            data_source: Some(TypedLocalObjectReference {
                api_group: Some("snapshot.storage.k8s.io".to_string()),
                kind: "VolumeSnapshot".to_string(),
                name: snapshot.1.to_string(),
            }),
            ..Default::default()
        }),
        status: None,
    }
}
