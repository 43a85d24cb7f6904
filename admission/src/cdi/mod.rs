//! CDI's admission: its webhook's validation of DataVolumes, DataSources and
//! DataImportCrons, and its authorization of clones across namespaces.

pub mod clone_auth;
pub mod validate;
