//! The PVC a DataVolume asks for: `spec.pvc` as written, or `spec.storage` completed from the
//! StorageProfile of its class (access modes, volume mode) with the size inflated by the
//! filesystem overhead, as CDI's `renderPvcSpec` does; plus CDI's annotations and labels.

use std::collections::BTreeMap;

use api::cdi::DataVolume;
use api::cdi::datavolume::STORAGE_RESOURCE;
use api::cdi::datavolume::annotations::{self, SELECTED_NODE};
use api::cdi::storageprofile::StorageProfileStatus;
use api::quantity::quantity_bytes;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, TypedLocalObjectReference,
    VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use super::keys::{ANN_CLONE_TYPE, ANN_CREATED_FOR_DATA_VOLUME, CDI_LABEL, content_type};
use super::transfer::{ImportSource, Transfer};

/// CDI aligns image sizes up to 1 MiB before adding the overhead.
pub const ALIGN: u128 = 1 << 20;
/// The access mode when neither the DataVolume nor the StorageProfile names one.
pub const DEFAULT_ACCESS_MODE: &str = "ReadWriteOnce";
/// The volume mode when neither the DataVolume nor the StorageProfile names one.
pub const FILESYSTEM: &str = "Filesystem";
/// The raw block volume mode.
pub const BLOCK: &str = "Block";
/// The StorageClass annotation that marks the default class.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// Why no PVC can be derived.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PvcError {
    /// Neither `pvc` nor `storage` is set.
    #[error("DataVolume {0} has neither spec.pvc nor spec.storage")]
    NoStorage(String),
    /// No size is requested and none can be taken from a clone source.
    #[error("DataVolume {0}: no storage size requested (spec.storage.resources.requests.storage)")]
    MissingSize(String),
    /// The requested size is not a quantity.
    #[error("DataVolume {name}: storage size {size:?} is not a quantity")]
    BadSize {
        /// The DataVolume.
        name: String,
        /// The size as written.
        size: String,
    },
}

/// What the PVC of a DataVolume depends on besides the DataVolume.
#[derive(Clone, Copy, Debug)]
pub struct PvcInputs<'a> {
    /// What fills the PVC.
    pub transfer: &'a Transfer,
    /// The storage class `spec.storage` resolves to (named, or the default class).
    pub storage_class: Option<&'a str>,
    /// The status of that class's StorageProfile.
    pub profile: Option<&'a StorageProfileStatus>,
    /// The fraction of a filesystem volume kept for the filesystem (0.06 by default).
    pub filesystem_overhead: f64,
    /// The source PVC of a clone.
    pub clone_source: Option<&'a PersistentVolumeClaim>,
    /// Whether the volume is preallocated.
    pub preallocation: bool,
    /// Whether the PVC waits for a consumer of its own (CDIConfig's
    /// `HonorWaitForFirstConsumer` on a WaitForFirstConsumer class).
    pub wait_for_first_consumer: bool,
}

/// The default StorageClass among `classes`, if exactly one is marked default (the newest
/// wins when several are, as Kubernetes' admission does).
pub fn default_storage_class(classes: &[StorageClass]) -> Option<&StorageClass> {
    classes
        .iter()
        .filter(|c| {
            c.annotations()
                .get(DEFAULT_CLASS_ANNOTATION)
                .is_some_and(|v| v == "true")
        })
        .max_by_key(|c| c.metadata.creation_timestamp.clone())
}

/// The space to request for an image of `requested` bytes on a filesystem volume: aligned
/// up to 1 MiB, then divided by (1 - overhead) and rounded up (CDI's `GetRequiredSpace`).
pub fn required_space(overhead: f64, requested: u128) -> u128 {
    let aligned = requested.div_ceil(ALIGN) * ALIGN;
    if !(0.0..1.0).contains(&overhead) || overhead == 0.0 {
        return aligned;
    }
    (aligned as f64 / (1.0 - overhead)).ceil() as u128
}

/// The space an image may take on a volume of `available` bytes: the overhead taken off
/// (of a filesystem volume) and rounded down to 1 MiB (CDI's `GetUsableSpace`).
pub fn usable_space(overhead: f64, available: u128) -> u128 {
    let without = if (0.0..1.0).contains(&overhead) && overhead > 0.0 {
        ((1.0 - overhead) * available as f64).ceil() as u128
    } else {
        available
    };
    without / ALIGN * ALIGN
}

fn storage_request(resources: Option<&VolumeResourceRequirements>) -> Option<&Quantity> {
    resources?.requests.as_ref()?.get(STORAGE_RESOURCE)
}

/// The PVC spec of a DataVolume: `spec.pvc` unchanged, or `spec.storage` completed.
pub fn desired_spec(
    dv: &DataVolume,
    inputs: &PvcInputs<'_>,
) -> Result<PersistentVolumeClaimSpec, PvcError> {
    let name = dv.name_any();
    let mut spec = if let Some(pvc) = &dv.spec.pvc {
        let mut spec = pvc.clone();
        if storage_request(spec.resources.as_ref()).is_none() {
            let size = clone_size(inputs).ok_or_else(|| PvcError::MissingSize(name.clone()))?;
            set_size(&mut spec, size);
        }
        spec
    } else if let Some(storage) = &dv.spec.storage {
        let wanted_mode = storage
            .volume_mode
            .clone()
            .filter(|m| m == FILESYSTEM || m == BLOCK);
        let sets = inputs
            .profile
            .and_then(|p| p.claim_property_sets.as_deref())
            .unwrap_or_default();
        let set = sets
            .iter()
            .find(|s| wanted_mode.is_none() || s.volume_mode == wanted_mode)
            .or(sets.first());
        let access_modes = storage
            .access_modes
            .clone()
            .filter(|m| !m.is_empty())
            .or_else(|| {
                set.map(|s| s.access_modes.clone())
                    .filter(|m| !m.is_empty())
            })
            .unwrap_or_else(|| vec![DEFAULT_ACCESS_MODE.to_string()]);
        let volume_mode = desired_volume_mode(dv, inputs.profile);
        let size = match storage_request(storage.resources.as_ref()) {
            Some(q) => {
                let bytes = quantity_bytes(q).ok_or_else(|| PvcError::BadSize {
                    name: name.clone(),
                    size: q.0.clone(),
                })?;
                if volume_mode == FILESYSTEM
                    && !matches!(inputs.transfer, Transfer::CsiClone { .. })
                {
                    Quantity(required_space(inputs.filesystem_overhead, bytes).to_string())
                } else {
                    q.clone()
                }
            }
            None => host_clone_size(inputs, &volume_mode)
                .or_else(|| clone_size(inputs))
                .ok_or_else(|| PvcError::MissingSize(name.clone()))?,
        };
        let mut spec = PersistentVolumeClaimSpec {
            access_modes: Some(access_modes),
            volume_mode: Some(volume_mode),
            storage_class_name: storage
                .storage_class_name
                .clone()
                .or(inputs.storage_class.map(str::to_string)),
            selector: storage.selector.clone(),
            volume_name: storage.volume_name.clone(),
            data_source: storage.data_source.clone(),
            data_source_ref: storage.data_source_ref.clone(),
            ..Default::default()
        };
        set_size(&mut spec, size);
        spec
    } else {
        return Err(PvcError::NoStorage(name));
    };
    if let Transfer::CsiClone {
        name: source,
        snapshot,
        ..
    } = inputs.transfer
    {
        spec.data_source = Some(if *snapshot {
            TypedLocalObjectReference {
                api_group: Some("snapshot.storage.k8s.io".to_string()),
                kind: "VolumeSnapshot".to_string(),
                name: source.clone(),
            }
        } else {
            TypedLocalObjectReference {
                api_group: None,
                kind: "PersistentVolumeClaim".to_string(),
                name: source.clone(),
            }
        });
    }
    Ok(spec)
}

fn set_size(spec: &mut PersistentVolumeClaimSpec, size: Quantity) {
    spec.resources
        .get_or_insert_with(Default::default)
        .requests
        .get_or_insert_with(Default::default)
        .insert(STORAGE_RESOURCE.to_string(), size);
}

/// The size of a host-assisted clone of a block source into a filesystem volume: the
/// source's size plus the filesystem's overhead, so that the copied image fits.
fn host_clone_size(inputs: &PvcInputs<'_>, target_mode: &str) -> Option<Quantity> {
    let source = inputs.clone_source?;
    let source_mode = source.spec.as_ref()?.volume_mode.as_deref();
    if !matches!(inputs.transfer, Transfer::HostClone { .. })
        || target_mode != FILESYSTEM
        || source_mode != Some(BLOCK)
    {
        return None;
    }
    let bytes = quantity_bytes(&clone_size(inputs)?)?;
    Some(Quantity(
        required_space(inputs.filesystem_overhead, bytes).to_string(),
    ))
}

/// The size of a clone's source: its request, else its capacity.
fn clone_size(inputs: &PvcInputs<'_>) -> Option<Quantity> {
    let source = inputs.clone_source?;
    let spec = source.spec.as_ref()?;
    storage_request(spec.resources.as_ref())
        .cloned()
        .or_else(|| {
            source
                .status
                .as_ref()?
                .capacity
                .as_ref()?
                .get(STORAGE_RESOURCE)
                .cloned()
        })
}

/// The annotations CDI's DataVolume controller puts on the PVC it creates.
pub fn desired_annotations(dv: &DataVolume, inputs: &PvcInputs<'_>) -> BTreeMap<String, String> {
    let mut ann: BTreeMap<String, String> = dv
        .annotations()
        .iter()
        .filter(|(k, _)| !k.starts_with("kubectl.kubernetes.io/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(uid) = &dv.metadata.uid {
        ann.insert(ANN_CREATED_FOR_DATA_VOLUME.into(), uid.clone());
    }
    ann.insert(annotations::CONTENT_TYPE.into(), content_type(dv).into());
    ann.insert(
        annotations::PREALLOCATION_REQUESTED.into(),
        inputs.preallocation.to_string(),
    );
    match inputs.transfer {
        Transfer::Import(source) => import_annotations(&mut ann, source),
        Transfer::Upload => {
            ann.insert(annotations::UPLOAD_REQUEST.into(), String::new());
        }
        Transfer::CsiClone {
            namespace,
            name,
            snapshot,
        } => {
            let clone_type = if *snapshot { "snapshot" } else { "csi-clone" };
            ann.insert(ANN_CLONE_TYPE.into(), clone_type.into());
            ann.insert(CLONE_REQUEST.into(), format!("{namespace}/{name}"));
            // A CSI clone has no worker pod to be its first consumer, and a hostpath clone
            // can only be made on the node that holds its source: unless the PVC waits for
            // a consumer of its own, it is placed where the source is.
            let source_node = inputs
                .clone_source
                .and_then(|source| source.annotations().get(SELECTED_NODE));
            if let (false, Some(node)) = (inputs.wait_for_first_consumer, source_node) {
                ann.insert(SELECTED_NODE.into(), node.clone());
            }
        }
        Transfer::HostClone {
            namespace, name, ..
        } => {
            ann.insert(ANN_CLONE_TYPE.into(), "copy".into());
            ann.insert(CLONE_REQUEST.into(), format!("{namespace}/{name}"));
        }
        Transfer::Unsupported(_) => {}
    }
    ann
}

/// PVC annotation naming the clone source, `namespace/name`.
pub const CLONE_REQUEST: &str = "k8s.io/CloneRequest";

fn import_annotations(ann: &mut BTreeMap<String, String>, source: &ImportSource) {
    ann.insert(annotations::IMPORT_SOURCE.into(), source.kind.into());
    if let Some(endpoint) = &source.endpoint {
        ann.insert(annotations::IMPORT_ENDPOINT.into(), endpoint.clone());
    }
    if let Some(secret) = &source.secret_ref {
        ann.insert(annotations::SECRET.into(), secret.clone());
    }
    if let Some(cm) = &source.cert_config_map {
        ann.insert(annotations::CERT_CONFIG_MAP.into(), cm.clone());
    }
}

/// The PVC of a DataVolume: same name and namespace, owned by it (controller), labelled as
/// CDI's, with CDI's annotations.
pub fn desired_pvc(
    dv: &DataVolume,
    inputs: &PvcInputs<'_>,
) -> Result<PersistentVolumeClaim, PvcError> {
    let spec = desired_spec(dv, inputs)?;
    let mut labels = dv.labels().clone();
    labels.insert(CDI_LABEL.0.into(), CDI_LABEL.1.into());
    Ok(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(dv.name_any()),
            namespace: dv.namespace(),
            labels: Some(labels),
            annotations: Some(desired_annotations(dv, inputs)),
            owner_references: dv.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// The volume mode of a DataVolume's PVC: as `spec.pvc` gives it, or `spec.storage`'s,
/// else the StorageProfile's first claim property set's; Filesystem by default.
pub fn desired_volume_mode(dv: &DataVolume, profile: Option<&StorageProfileStatus>) -> String {
    if let Some(pvc) = &dv.spec.pvc {
        return pvc
            .volume_mode
            .clone()
            .unwrap_or_else(|| FILESYSTEM.to_string());
    }
    let wanted = dv
        .spec
        .storage
        .as_ref()
        .and_then(|s| s.volume_mode.clone())
        .filter(|m| m == FILESYSTEM || m == BLOCK);
    let first_set = profile
        .and_then(|p| p.claim_property_sets.as_deref())
        .and_then(|sets| sets.first());
    wanted
        .or_else(|| first_set.and_then(|s| s.volume_mode.clone()))
        .unwrap_or_else(|| FILESYSTEM.to_string())
}

/// Whether a CSI clone of `source_pvc` into a PVC of `target_class` and `target_mode` is
/// possible: both of one storage class and one volume mode, as CDI requires. (Another
/// namespace is reached through a temporary claim, see `cross_namespace`.)
pub fn csi_clone_possible(
    source_pvc: &PersistentVolumeClaim,
    target_class: Option<&str>,
    target_mode: &str,
) -> bool {
    let spec = source_pvc.spec.as_ref();
    let source_class = spec.and_then(|s| s.storage_class_name.as_deref());
    let source_mode = spec
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or(FILESYSTEM);
    source_class.is_some() && source_class == target_class && source_mode == target_mode
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::cdi::DataVolumeSpec;
    use api::cdi::datavolume::{DataVolumeBlankImage, DataVolumeSource, StorageSpec};
    use api::cdi::storageprofile::ClaimPropertySet;

    fn dv(storage: StorageSpec) -> DataVolume {
        let mut dv = DataVolume::new(
            "disk",
            DataVolumeSpec {
                source: Some(DataVolumeSource {
                    blank: Some(DataVolumeBlankImage {}),
                    ..Default::default()
                }),
                storage: Some(storage),
                ..Default::default()
            },
        );
        dv.metadata.namespace = Some("ns".into());
        dv.metadata.uid = Some("uid-dv".into());
        dv
    }

    fn sized(size: &str) -> StorageSpec {
        StorageSpec {
            resources: Some(VolumeResourceRequirements {
                requests: Some([(STORAGE_RESOURCE.to_string(), Quantity(size.into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn blank() -> Transfer {
        Transfer::Import(ImportSource {
            kind: "none",
            ..Default::default()
        })
    }

    fn inputs<'a>(
        transfer: &'a Transfer,
        profile: Option<&'a StorageProfileStatus>,
    ) -> PvcInputs<'a> {
        PvcInputs {
            transfer,
            storage_class: Some("hostpath-csi"),
            profile,
            filesystem_overhead: 0.06,
            clone_source: None,
            preallocation: false,
            wait_for_first_consumer: false,
        }
    }

    #[test]
    fn required_space_matches_cdi() {
        // CDI: ceil(align_up(1Gi, 1Mi) / 0.94)
        assert_eq!(required_space(0.06, 1 << 30), 1_142_278_537);
        assert_eq!(required_space(0.0, 1), 1 << 20);
        assert_eq!(
            required_space(0.06, (1 << 20) + 1),
            ((2u128 << 20) as f64 / 0.94).ceil() as u128
        );
    }

    #[test]
    fn usable_space_matches_cdi() {
        // CDI: round_down(ceil((1 - 0.06) * 1Gi), 1Mi)
        assert_eq!(usable_space(0.06, 1 << 30), 962 << 20);
        assert_eq!(usable_space(0.0, (64 << 20) + 5), 64 << 20);
        assert_eq!(usable_space(0.06, 1), 0);
    }

    #[test]
    fn storage_is_completed_with_defaults_and_inflated() {
        let transfer = blank();
        let pvc = desired_pvc(&dv(sized("1Gi")), &inputs(&transfer, None)).unwrap();
        let spec = pvc.spec.unwrap();
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
        assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));
        assert_eq!(spec.storage_class_name.as_deref(), Some("hostpath-csi"));
        assert_eq!(
            spec.resources.unwrap().requests.unwrap()["storage"],
            Quantity("1142278537".into())
        );
        assert_eq!(pvc.metadata.name.as_deref(), Some("disk"));
        assert_eq!(pvc.metadata.namespace.as_deref(), Some("ns"));
        let owner = &pvc.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("DataVolume", "uid-dv", Some(true))
        );
        let ann = pvc.metadata.annotations.unwrap();
        assert_eq!(ann["cdi.kubevirt.io/storage.import.source"], "none");
        assert_eq!(ann["cdi.kubevirt.io/storage.contentType"], "kubevirt");
        assert_eq!(
            pvc.metadata.labels.unwrap()["app"],
            "containerized-data-importer"
        );
    }

    #[test]
    fn block_from_the_profile_is_not_inflated() {
        let profile = StorageProfileStatus {
            claim_property_sets: Some(vec![ClaimPropertySet {
                access_modes: vec!["ReadWriteMany".into()],
                volume_mode: Some("Block".into()),
            }]),
            ..Default::default()
        };
        let transfer = blank();
        let spec = desired_spec(&dv(sized("1Gi")), &inputs(&transfer, Some(&profile))).unwrap();
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteMany".to_string()]));
        assert_eq!(spec.volume_mode.as_deref(), Some("Block"));
        assert_eq!(
            spec.resources.unwrap().requests.unwrap()["storage"],
            Quantity("1Gi".into())
        );
    }

    #[test]
    fn an_explicit_volume_mode_picks_its_property_set() {
        let profile = StorageProfileStatus {
            claim_property_sets: Some(vec![
                ClaimPropertySet {
                    access_modes: vec!["ReadWriteOnce".into()],
                    volume_mode: Some("Filesystem".into()),
                },
                ClaimPropertySet {
                    access_modes: vec!["ReadWriteMany".into()],
                    volume_mode: Some("Block".into()),
                },
            ]),
            ..Default::default()
        };
        let mut storage = sized("1Gi");
        storage.volume_mode = Some("Block".into());
        let transfer = blank();
        let spec = desired_spec(&dv(storage), &inputs(&transfer, Some(&profile))).unwrap();
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteMany".to_string()]));
    }

    #[test]
    fn pvc_is_taken_as_written() {
        let mut d = dv(sized("1Gi"));
        d.spec.storage = None;
        d.spec.pvc = Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteMany".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some([("storage".to_string(), Quantity("500Mi".into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let transfer = blank();
        let spec = desired_spec(&d, &inputs(&transfer, None)).unwrap();
        assert_eq!(spec.volume_mode, None);
        assert_eq!(spec.storage_class_name, None);
        assert_eq!(
            spec.resources.unwrap().requests.unwrap()["storage"],
            Quantity("500Mi".into())
        );
    }

    #[test]
    fn clones_take_the_source_size_and_a_data_source() {
        let transfer = Transfer::CsiClone {
            namespace: "ns".into(),
            name: "golden".into(),
            snapshot: false,
        };
        let source = PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: Some("hostpath-csi".into()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_string(), Quantity("2Gi".into()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut i = inputs(&transfer, None);
        i.clone_source = Some(&source);
        let pvc = desired_pvc(&dv(StorageSpec::default()), &i).unwrap();
        let spec = pvc.spec.unwrap();
        assert_eq!(
            spec.resources.unwrap().requests.unwrap()["storage"],
            Quantity("2Gi".into())
        );
        let ds = spec.data_source.unwrap();
        assert_eq!(
            (ds.kind.as_str(), ds.name.as_str()),
            ("PersistentVolumeClaim", "golden")
        );
        assert_eq!(
            pvc.metadata.annotations.unwrap()[CLONE_REQUEST],
            "ns/golden"
        );
        assert!(csi_clone_possible(
            &source,
            Some("hostpath-csi"),
            FILESYSTEM
        ));
        assert!(!csi_clone_possible(&source, Some("nfs"), FILESYSTEM));
        // Another volume mode is a host-assisted copy.
        assert!(!csi_clone_possible(&source, Some("hostpath-csi"), BLOCK));
    }

    #[test]
    fn a_csi_clone_is_placed_on_its_source_node_unless_it_waits_for_a_consumer() {
        let transfer = Transfer::CsiClone {
            namespace: "ns".into(),
            name: "golden".into(),
            snapshot: false,
        };
        let source = PersistentVolumeClaim {
            metadata: ObjectMeta {
                annotations: Some([(SELECTED_NODE.to_string(), "node-a".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut i = inputs(&transfer, None);
        i.clone_source = Some(&source);
        let d = dv(StorageSpec::default());
        assert_eq!(
            desired_annotations(&d, &i)
                .get(SELECTED_NODE)
                .map(String::as_str),
            Some("node-a")
        );
        i.wait_for_first_consumer = true;
        assert_eq!(desired_annotations(&d, &i).get(SELECTED_NODE), None);
    }

    #[test]
    fn a_missing_size_is_an_error() {
        let transfer = blank();
        assert_eq!(
            desired_spec(&dv(StorageSpec::default()), &inputs(&transfer, None)),
            Err(PvcError::MissingSize("disk".into()))
        );
    }
}
