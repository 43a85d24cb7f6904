//! CDI's PVC rendering (its `pvc-mutate.cdi.kubevirt.io` webhook): a claim created with the
//! label `cdi.kubevirt.io/applyStorageProfile: "true"` is completed from the StorageProfile
//! of its class as a DataVolume's `spec.storage` is: the access modes and volume mode the
//! profile prefers where the claim leaves them out (`volumeMode: FromStorageProfile` counts
//! as left out), and on a filesystem volume the size inflated by the filesystem overhead.
//! On unless CDIConfig's `spec.webhookPvcRendering` is `Disabled`, as in CDI v1.66.
//!
//! Not rendered here: the size of a claim that clones through a `VolumeCloneSource`
//! populator (no such populator here; the claim keeps the size it asks for) and the
//! StorageProfile's minimum supported size.

use api::cdi::datavolume::STORAGE_RESOURCE;
use api::cdi::storageprofile::StorageProfileStatus;
use api::quantity::quantity_bytes;
use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::datavolume::pvc::{BLOCK, FILESYSTEM, required_space};

/// The label that asks for a claim to be rendered.
pub const APPLY_STORAGE_PROFILE_LABEL: &str = "cdi.kubevirt.io/applyStorageProfile";
/// The volume mode that asks for the profile's.
pub const FROM_STORAGE_PROFILE: &str = "FromStorageProfile";
/// The annotation naming a claim's content (`kubevirt`, the default, or `archive`).
pub const CONTENT_TYPE_ANNOTATION: &str = "cdi.kubevirt.io/storage.contentType";
/// CDIConfig's `spec.webhookPvcRendering` value that turns rendering off.
pub const RENDERING_DISABLED: &str = "Disabled";

/// The smallest disk KubeVirt takes, and so the smallest claim rendered.
const MIN_SIZE: u128 = 1 << 20;

/// Why a labeled claim cannot be rendered, worded as CDI's webhook words it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RenderError {
    /// An archive is unpacked onto a filesystem.
    #[error("ContentType Archive cannot have block volumeMode")]
    ArchiveOnBlock,
    /// No class, so no profile to take access modes from.
    #[error("PVC spec is missing accessMode and no storageClass to choose profile")]
    NoStorageClass,
    /// The class has no StorageProfile (yet).
    #[error("cannot get StorageProfile {0}")]
    NoProfile(String),
    /// The profile names no access modes.
    #[error("no accessMode specified in StorageProfile {0}")]
    NoAccessModes(String),
    /// No property set of the profile has the claim's volume mode.
    #[error("no matching accessMode specified in StorageProfile {0}")]
    NoMatchingAccessModes(String),
    /// No size requested.
    #[error("PVC Spec is not valid - missing storage size")]
    MissingSize,
    /// The size requested is not a quantity.
    #[error("PVC Spec is not valid - storage size {0:?} is not a quantity")]
    BadSize(String),
    /// Smaller than a disk may be.
    #[error("PVC Spec is not valid - storage size should be at least 1MiB")]
    TooSmall,
}

/// What a claim is rendered from besides itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct RenderInputs<'a> {
    /// The class the claim will get: its own, else the default (already set by the
    /// DefaultStorageClass admission plugin, which runs first).
    pub class: Option<&'a str>,
    /// That class's StorageProfile, `None` when there is none.
    pub profile: Option<&'a StorageProfileStatus>,
    /// The filesystem overhead of that class (CDIConfig's).
    pub overhead: f64,
    /// Whether the claim holds an archive (its content-type annotation says `archive`).
    pub archive: bool,
}

/// Completes `spec` from `inputs` as CDI's `RenderPvc` does.
pub fn render_claim(
    spec: &mut PersistentVolumeClaimSpec,
    inputs: &RenderInputs<'_>,
) -> Result<(), RenderError> {
    if spec.volume_mode.as_deref() == Some(FROM_STORAGE_PROFILE) {
        spec.volume_mode = None;
    }
    render_modes(spec, inputs)?;
    if spec.data_source_ref.as_ref().is_some_and(is_clone_source)
        || spec
            .data_source
            .as_ref()
            .is_some_and(|s| s.kind == "VolumeSnapshot")
        || spec
            .data_source_ref
            .as_ref()
            .is_some_and(|s| s.kind == "VolumeSnapshot")
    {
        // A clone's or a restore's size is the source's business.
        return Ok(());
    }
    render_size(spec, inputs.overhead)
}

fn is_clone_source(reference: &k8s_openapi::api::core::v1::TypedObjectReference) -> bool {
    reference.api_group.as_deref() == Some("cdi.kubevirt.io")
        && reference.kind == "VolumeCloneSource"
        && !reference.name.is_empty()
}

/// Access modes and volume mode: both from the profile's first property set when both are
/// left out, else the one missing from the property set that agrees with the other.
fn render_modes(
    spec: &mut PersistentVolumeClaimSpec,
    inputs: &RenderInputs<'_>,
) -> Result<(), RenderError> {
    if inputs.archive {
        if spec.volume_mode.as_deref() == Some(BLOCK) {
            return Err(RenderError::ArchiveOnBlock);
        }
        spec.volume_mode = Some(FILESYSTEM.to_owned());
    }
    let no_modes = spec.access_modes.as_ref().is_none_or(Vec::is_empty);
    let no_volume_mode = spec.volume_mode.as_ref().is_none_or(String::is_empty);
    let Some(class) = inputs.class else {
        return match no_modes {
            true => Err(RenderError::NoStorageClass),
            false => Ok(()),
        };
    };
    spec.storage_class_name = Some(class.to_owned());
    if !no_modes && !no_volume_mode {
        return Ok(());
    }
    let sets = || {
        inputs
            .profile
            .and_then(|p| p.claim_property_sets.as_deref())
    };
    if no_modes && no_volume_mode {
        let profile = inputs
            .profile
            .ok_or_else(|| RenderError::NoProfile(class.to_owned()))?;
        let first = profile
            .claim_property_sets
            .as_deref()
            .and_then(<[_]>::first)
            .filter(|set| !set.access_modes.is_empty())
            .ok_or_else(|| RenderError::NoAccessModes(class.to_owned()))?;
        spec.access_modes = Some(first.access_modes.clone());
        spec.volume_mode = first.volume_mode.clone();
    } else if no_modes {
        inputs
            .profile
            .ok_or_else(|| RenderError::NoProfile(class.to_owned()))?;
        let wanted = spec.volume_mode.clone();
        let set = sets()
            .unwrap_or_default()
            .iter()
            .find(|set| set.volume_mode == wanted && !set.access_modes.is_empty())
            .ok_or_else(|| RenderError::NoMatchingAccessModes(class.to_owned()))?;
        spec.access_modes = Some(set.access_modes.clone());
    } else {
        // Optional: left to Kubernetes' default when no property set shares an access mode.
        let modes = spec.access_modes.clone().unwrap_or_default();
        spec.volume_mode = sets()
            .unwrap_or_default()
            .iter()
            .find(|set| set.access_modes.iter().any(|m| modes.contains(m)))
            .and_then(|set| set.volume_mode.clone());
    }
    Ok(())
}

/// The requested size, at least 1 MiB, inflated by the overhead on a filesystem volume.
fn render_size(spec: &mut PersistentVolumeClaimSpec, overhead: f64) -> Result<(), RenderError> {
    let requests = spec
        .resources
        .get_or_insert_with(Default::default)
        .requests
        .get_or_insert_with(Default::default);
    let requested = requests
        .get(STORAGE_RESOURCE)
        .ok_or(RenderError::MissingSize)?;
    let bytes =
        quantity_bytes(requested).ok_or_else(|| RenderError::BadSize(requested.0.clone()))?;
    if bytes < MIN_SIZE {
        return Err(RenderError::TooSmall);
    }
    if spec.volume_mode.as_deref().unwrap_or(FILESYSTEM) == FILESYSTEM {
        let size = Quantity(required_space(overhead, bytes).to_string());
        requests.insert(STORAGE_RESOURCE.to_owned(), size);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::cdi::storageprofile::ClaimPropertySet;
    use serde_json::json;

    fn claim(spec: serde_json::Value) -> PersistentVolumeClaimSpec {
        serde_json::from_value(spec).expect("a claim spec")
    }

    fn profile(sets: &[(&[&str], Option<&str>)]) -> StorageProfileStatus {
        StorageProfileStatus {
            claim_property_sets: Some(
                sets.iter()
                    .map(|(modes, mode)| ClaimPropertySet {
                        access_modes: modes.iter().map(|m| m.to_string()).collect(),
                        volume_mode: mode.map(str::to_owned),
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn inputs<'a>(profile: Option<&'a StorageProfileStatus>) -> RenderInputs<'a> {
        RenderInputs {
            class: Some("hostpath-csi"),
            profile,
            overhead: 0.06,
            archive: false,
        }
    }

    #[test]
    fn a_bare_claim_takes_the_profiles_first_set_and_an_inflated_size() {
        let profile = profile(&[
            (&["ReadWriteOnce"], Some("Filesystem")),
            (&["ReadWriteMany"], Some("Block")),
        ]);
        let mut spec = claim(json!({"resources": {"requests": {"storage": "1Gi"}}}));
        render_claim(&mut spec, &inputs(Some(&profile))).unwrap();
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_owned()]));
        assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));
        assert_eq!(spec.storage_class_name.as_deref(), Some("hostpath-csi"));
        // 1 GiB / (1 - 0.06), rounded up: what a DataVolume of 1Gi asks for.
        let size = &spec.resources.unwrap().requests.unwrap()[STORAGE_RESOURCE];
        assert_eq!(size.0, required_space(0.06, 1 << 30).to_string());
    }

    #[test]
    fn the_missing_half_comes_from_the_set_that_agrees_with_the_other() {
        let profile = profile(&[
            (&["ReadWriteOnce"], Some("Filesystem")),
            (&["ReadWriteMany"], Some("Block")),
        ]);
        let mut block = claim(json!({"volumeMode": "Block",
                                     "resources": {"requests": {"storage": "1Gi"}}}));
        render_claim(&mut block, &inputs(Some(&profile))).unwrap();
        assert_eq!(block.access_modes, Some(vec!["ReadWriteMany".to_owned()]));
        assert_eq!(
            block.resources.unwrap().requests.unwrap()[STORAGE_RESOURCE].0,
            "1Gi",
            "a block volume is not inflated"
        );
        let mut rwx = claim(
            json!({"accessModes": ["ReadWriteMany"], "volumeMode": "FromStorageProfile",
                                   "resources": {"requests": {"storage": "1Gi"}}}),
        );
        render_claim(&mut rwx, &inputs(Some(&profile))).unwrap();
        assert_eq!(rwx.volume_mode.as_deref(), Some("Block"));
        let mut unknown = claim(json!({"accessModes": ["ReadOnlyMany"],
                                       "resources": {"requests": {"storage": "1Gi"}}}));
        render_claim(&mut unknown, &inputs(Some(&profile))).unwrap();
        assert_eq!(unknown.volume_mode, None, "left to Kubernetes' default");
    }

    #[test]
    fn what_cannot_be_rendered_is_refused_with_cdis_words() {
        let profile = profile(&[(&["ReadWriteOnce"], Some("Filesystem"))]);
        let sized = json!({"resources": {"requests": {"storage": "1Gi"}}});
        let refused = |spec: serde_json::Value, inputs: RenderInputs<'_>| {
            render_claim(&mut claim(spec), &inputs)
                .unwrap_err()
                .to_string()
        };
        let no_class = RenderInputs {
            class: None,
            ..inputs(None)
        };
        assert_eq!(
            refused(sized.clone(), no_class),
            "PVC spec is missing accessMode and no storageClass to choose profile"
        );
        assert_eq!(
            refused(sized.clone(), inputs(None)),
            "cannot get StorageProfile hostpath-csi"
        );
        let empty = StorageProfileStatus::default();
        assert_eq!(
            refused(sized.clone(), inputs(Some(&empty))),
            "no accessMode specified in StorageProfile hostpath-csi"
        );
        let block = json!({"volumeMode": "Block", "resources": {"requests": {"storage": "1Gi"}}});
        assert_eq!(
            refused(block.clone(), inputs(Some(&profile))),
            "no matching accessMode specified in StorageProfile hostpath-csi"
        );
        let archive = RenderInputs {
            archive: true,
            ..inputs(Some(&profile))
        };
        assert_eq!(
            refused(block, archive),
            "ContentType Archive cannot have block volumeMode"
        );
        assert_eq!(
            refused(json!({}), inputs(Some(&profile))),
            "PVC Spec is not valid - missing storage size"
        );
        let tiny = json!({"resources": {"requests": {"storage": "1Ki"}}});
        assert_eq!(
            refused(tiny, inputs(Some(&profile))),
            "PVC Spec is not valid - storage size should be at least 1MiB"
        );
    }

    #[test]
    fn a_restore_keeps_its_size_and_a_complete_claim_keeps_its_modes() {
        let profile = profile(&[(&["ReadWriteOnce"], Some("Filesystem"))]);
        let mut restore = claim(
            json!({"accessModes": ["ReadWriteMany"], "volumeMode": "Filesystem",
            "dataSource": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "s"},
            "resources": {"requests": {"storage": "1Gi"}}}),
        );
        render_claim(&mut restore, &inputs(Some(&profile))).unwrap();
        assert_eq!(restore.access_modes, Some(vec!["ReadWriteMany".to_owned()]));
        assert_eq!(
            restore.resources.unwrap().requests.unwrap()[STORAGE_RESOURCE].0,
            "1Gi"
        );
    }
}
