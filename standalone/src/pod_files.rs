//! Where the node agent keeps a pod's files in its state directory: the pod's root (its
//! in-pod paths) and its containers' logs. The node agent writes them; the API server reads
//! the logs for `kubectl logs` ([`crate::apiserver`]), in the record format of [`crate::cri_log`].

use std::path::{Path, PathBuf};

/// The directory a pod's in-pod paths live under, on this machine.
pub fn pod_root(state_dir: &Path, pod_uid: &str) -> PathBuf {
    state_dir.join("pods").join(pod_uid).join("root")
}

/// The node agent's state directory in a platform's data directory.
pub fn state_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("node")
}

/// What a pod's container wrote to stdout and stderr: in its current (or last) run, or with
/// `previous` in the run before, as the kubelet keeps them for `kubectl logs [--previous]`.
pub fn container_log(state_dir: &Path, pod_uid: &str, container: &str, previous: bool) -> PathBuf {
    // A container's name is a DNS label; one that is not must still not leave the directory.
    let container = container.replace('/', "_");
    let name = if previous {
        format!("{container}.previous.log")
    } else {
        format!("{container}.log")
    };
    state_dir.join("pods").join(pod_uid).join("logs").join(name)
}
