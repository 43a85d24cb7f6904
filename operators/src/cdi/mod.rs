//! CDI's controllers: DataVolume (PVCs, importer, upload server and clone pods, CSI clones,
//! phases and conditions as CDI writes them), DataSource, DataImportCron, StorageProfile and
//! CDIConfig's status.

pub mod config;
pub mod dataimportcron;
pub mod datasource;
pub mod datavolume;
pub mod pvc_rendering;
pub mod storageprofile;
