//! What every pod of Ferrovirt's is run with, defined once: the fixed paths of a pod (/data,
//! /dev/cdi-block-volume, /dev/termination-log, the launcher's sockets) resolved under
//! [`POD_ROOT_ENV`] when the local node agent runs the pod as a process rather than in a
//! container with its own mount namespace, the pod's address, and the variables the pods
//! read beyond their upstream contracts (test hooks such as [`TERMINATION_LOG_ENV`]).
//!
//! The contracts of one family sit beside their kinds: CDI's worker pods in
//! [`crate::cdi::pod_contract`], the virt-launcher pod in [`crate::kubevirt::pod_contract`].

use std::path::{Path, PathBuf};

use crate::cdi::pod_contract::env::{Lookup, ProcessEnv};

/// Set by the local node agent to the directory the pod's volumes are published under: where
/// a pod's program finds the root its fixed paths (/data, /dev/...) live under.
pub const POD_ROOT_ENV: &str = "FERROVIRT_POD_ROOT";
/// Set by the local node agent to the pod's own address, for programs that would listen on
/// 0.0.0.0 in a container.
pub const POD_IP_ENV: &str = "FERROVIRT_POD_IP";

/// Where a worker pod writes its termination message instead of
/// [`crate::cdi::pod_contract::TERMINATION_LOG_PATH`] when set (a test hook).
pub const TERMINATION_LOG_ENV: &str = "FERROVIRT_TERMINATION_LOG";

/// Where the in-pod path `path` is for this process.
pub fn in_pod(path: &str) -> PathBuf {
    match std::env::var_os(POD_ROOT_ENV) {
        Some(root) if !root.is_empty() => under_root(Path::new(&root), path),
        _ => PathBuf::from(path),
    }
}

/// Where the in-pod path `path` is for a pod whose root is `root`.
pub fn under_root(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// The variable `name`, unless it is unset or empty.
pub fn env(name: &str) -> Option<String> {
    ProcessEnv.var(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_pod_path_is_under_the_pod_root() {
        assert_eq!(
            under_root(Path::new("/pods/1"), "/var/run/x"),
            PathBuf::from("/pods/1/var/run/x")
        );
    }
}
