//! Event and condition reasons of the VirtualMachine controller, by upstream's names.

/// An instance was created.
pub const SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
/// Creating an instance failed (also the Failure condition's reason).
pub const FAILED_CREATE: &str = "FailedCreate";
/// An instance was deleted.
pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
/// Deleting an instance failed.
pub const FAILED_DELETE: &str = "FailedDelete";
/// A DataVolume of the VM was created.
pub const SUCCESSFUL_DATA_VOLUME_CREATE: &str = "SuccessfulDataVolumeCreate";
/// Creating a DataVolume failed.
pub const FAILED_DATA_VOLUME_CREATE: &str = "FailedDataVolumeCreate";
/// A DataVolume of the VM failed.
pub const FAILED_DATA_VOLUME_IMPORT: &str = "FailedDataVolumeImport";
/// Ready condition: no instance exists.
pub const VMI_NOT_EXISTS: &str = "VMINotExists";
/// Ready condition: the instance has no Ready condition.
pub const VMI_CONDITION_MISSING: &str = "VMIConditionMissing";
/// DataVolumesReady condition: every DataVolume can be used.
pub const ALL_DVS_READY: &str = "AllDVsReady";
/// DataVolumesReady condition: some DataVolume is still being filled.
pub const NOT_ALL_DVS_READY: &str = "NotAllDVsReady";
