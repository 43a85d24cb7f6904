//! OpenShift Templates: `ferrovirt process` (as `oc process`) and the embedded API server's
//! `processedtemplates`.

pub mod process;
pub mod processed;
