//! The variables Ferrovirt's worker pods read beyond CDI's contract (test hooks such as
//! `FERROVIRT_TERMINATION_LOG`); CDI's own are read through `api::cdi::pod_contract::env`.

use api::cdi::pod_contract::env::{Lookup, ProcessEnv};

/// The variable `name`, unless it is unset or empty.
pub fn env(name: &str) -> Option<String> {
    ProcessEnv.var(name)
}
