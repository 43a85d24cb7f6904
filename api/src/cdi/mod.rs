//! cdi.kubevirt.io/v1beta1: DataVolume, DataSource, DataImportCron, StorageProfile, and the
//! operator kinds CDI and CDIConfig, with DataVolume defaulting (validation is
//! admission's, `admission::cdi::validate`).

pub mod dataimportcron;
pub mod datasource;
pub mod datavolume;
pub mod default;
pub mod operator;
pub mod pod_contract;
pub mod storageprofile;

pub use dataimportcron::{
    DataImportCron, DataImportCronSpec, DataImportCronStatus, DataVolumeTemplate,
};
pub use datasource::{DataSource, DataSourceSource, DataSourceSpec, DataSourceStatus};
pub use datavolume::{
    DataVolume, DataVolumeContentType, DataVolumePhase, DataVolumeSource, DataVolumeSpec,
    DataVolumeStatus, StorageSpec,
};
pub use operator::{CDI, CDIConfig, CdiConfigSpec, CdiSpec};
pub use storageprofile::{StorageProfile, StorageProfileSpec, StorageProfileStatus};

/// The API group.
pub const GROUP: &str = "cdi.kubevirt.io";
/// The API version.
pub const VERSION: &str = "v1beta1";
