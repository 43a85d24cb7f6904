//! Instancetypes and preferences (`instancetype.kubevirt.io/v1beta1`): the sizes a VM takes
//! its vCPUs and memory from, and the device and firmware defaults a guest OS prefers, each
//! namespaced and cluster-wide. KubeVirt v1.6 serves only v1beta1 (its CRDs list v1alpha1
//! and v1alpha2 as not served), so that is all this module declares.

mod instancetypes;
mod preferences;

pub use instancetypes::*;
pub use preferences::*;

/// The API group.
pub const GROUP: &str = "instancetype.kubevirt.io";
/// The one served version.
pub const VERSION: &str = "v1beta1";

/// The label of a volume (claim, DataVolume, DataSource) naming the instancetype to infer.
pub const DEFAULT_INSTANCETYPE_LABEL: &str = "instancetype.kubevirt.io/default-instancetype";
/// The label naming the kind of [`DEFAULT_INSTANCETYPE_LABEL`]'s instancetype.
pub const DEFAULT_INSTANCETYPE_KIND_LABEL: &str =
    "instancetype.kubevirt.io/default-instancetype-kind";
/// The label of a volume naming the preference to infer.
pub const DEFAULT_PREFERENCE_LABEL: &str = "instancetype.kubevirt.io/default-preference";
/// The label naming the kind of [`DEFAULT_PREFERENCE_LABEL`]'s preference.
pub const DEFAULT_PREFERENCE_KIND_LABEL: &str = "instancetype.kubevirt.io/default-preference-kind";

mod apply;
mod preference_apply;
pub mod requirements;
pub mod topology;

pub use apply::{Conflicts, apply};
pub use preference_apply::apply_preference;
pub mod matcher;

/// The annotations naming a VMI's instancetype and preference, as upstream sets them.
pub mod annotations {
    /// A namespaced instancetype's name.
    pub const INSTANCETYPE: &str = "kubevirt.io/instancetype-name";
    /// A cluster instancetype's name.
    pub const CLUSTER_INSTANCETYPE: &str = "kubevirt.io/cluster-instancetype-name";
    /// A namespaced preference's name.
    pub const PREFERENCE: &str = "kubevirt.io/preference-name";
    /// A cluster preference's name.
    pub const CLUSTER_PREFERENCE: &str = "kubevirt.io/cluster-preference-name";
}

#[cfg(test)]
mod tests;
