//! The platform of `ferrovirt up`, one binary: DataVolumes, DataImportCrons, S3, clones,
//! faults, the HPP operator, HCO, SSP, templates, the MAC pool, VM pools and VMI replica
//! sets, PriorityClasses and VirtualMachineInstancePresets, pods of several containers,
//! Tekton TaskRuns and PipelineRuns, and the soak test.

mod dataimportcron;
mod datavolume_s3;
mod datavolumes;
mod faults;
mod hco;
mod host_clone;
mod hpp;
mod macpool;
#[path = "../platform/mod.rs"]
mod platform;
mod pods;
mod priority_presets;
mod pvc_rendering;
mod replicas;
mod soak;
mod ssp;
mod tekton_runs;
mod templates;
