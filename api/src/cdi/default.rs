//! Defaulting of CDI objects, as CDI's mutating webhook and API server do it: applied to an
//! object before it is validated and stored.

use super::datavolume::{DataVolume, DataVolumeContentType, DataVolumeSpec};

/// Fills in the defaults of a DataVolume.
pub fn default_data_volume(dv: &mut DataVolume) {
    default_data_volume_spec(&mut dv.spec);
}

/// Fills in the defaults of a DataVolume spec wherever it is embedded: `contentType`
/// becomes `kubevirt` when unset.
pub fn default_data_volume_spec(spec: &mut DataVolumeSpec) {
    if spec.content_type.is_none() {
        tracing::trace!("defaulting DataVolume contentType to kubevirt");
        spec.content_type = Some(DataVolumeContentType::KubeVirt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_type_defaults_to_kubevirt_and_keeps_archive() {
        let mut dv = DataVolume::new("d", DataVolumeSpec::default());
        default_data_volume(&mut dv);
        assert_eq!(dv.spec.content_type, Some(DataVolumeContentType::KubeVirt));
        dv.spec.content_type = Some(DataVolumeContentType::Archive);
        default_data_volume(&mut dv);
        assert_eq!(dv.spec.content_type, Some(DataVolumeContentType::Archive));
    }
}
