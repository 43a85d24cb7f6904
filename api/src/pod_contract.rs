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

/// The last segment of the repository of the images the local node agent runs: Ferrovirt's
/// own (`quay.io/ferrovirt/ferrovirt:TAG`), whose binary runs every pod on one machine.
pub const OWN_IMAGE: &str = "ferrovirt";

/// Whether `image` is Ferrovirt's own: its repository's last segment is [`OWN_IMAGE`].
pub fn is_own_image(image: &str) -> bool {
    image_repository_name(image) == OWN_IMAGE
}

/// The last segment of `image`'s repository, without registry, tag or digest
/// (`quay.io/kubevirt/tekton-tasks:v0.26.0` is `tekton-tasks`).
pub fn image_repository_name(image: &str) -> &str {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last.split(':').next().unwrap_or(last)
}

/// The variable `name`, unless it is unset or empty.
pub fn env(name: &str) -> Option<String> {
    ProcessEnv.var(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_images_are_recognized_by_repository_name() {
        assert!(is_own_image("quay.io/ferrovirt/ferrovirt:latest"));
        assert!(is_own_image("ferrovirt"));
        assert!(is_own_image("localhost:5000/ferrovirt@sha256:abc"));
        assert!(!is_own_image("quay.io/kubevirt/cdi-importer:v1.60"));
        assert!(!is_own_image("quay.io/ferrovirt/other:1"));
        assert_eq!(
            image_repository_name("quay.io/kubevirt/tekton-tasks:v0.26.0"),
            "tekton-tasks"
        );
    }

    #[test]
    fn an_in_pod_path_is_under_the_pod_root() {
        assert_eq!(
            under_root(Path::new("/pods/1"), "/var/run/x"),
            PathBuf::from("/pods/1/var/run/x")
        );
    }
}
