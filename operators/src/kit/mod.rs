//! The shared controller kit: what every controller does with the API server the same way.
//! Deletes that tolerate an object already gone, finalizers added and removed against the
//! version that was read, merge patches of annotations and status, conditions set by type,
//! and events.

pub mod conditions;
pub mod events;
pub mod finalizer;
pub mod objects;

pub use events::publish;
pub use objects::{delete_ignoring_missing, is_status, patch_annotations, patch_status};

/// The API resource of VolumeSnapshots (a CRD of the external snapshotter, not in k8s-openapi).
pub fn volume_snapshot_resource() -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "snapshot.storage.k8s.io",
        "v1",
        "VolumeSnapshot",
    ))
}
