//! The contract between Ferrovirt's pods and what runs them, defined once: the fixed paths of
//! a pod (/data, /dev/cdi-block-volume, /dev/termination-log, the launcher's control socket),
//! resolved under `FERROVIRT_POD_ROOT` when the local node agent runs the pod as a process
//! rather than in a container with its own mount namespace, and the variables the worker
//! pods read beyond CDI's contract (test hooks such as `FERROVIRT_TERMINATION_LOG`); CDI's
//! own are read through `api::cdi::pod_contract::env`.
//!
//! The parts other crates own are named here, not repeated: the node agent's variables
//! (`standalone::node_agent`), CDI's paths (`api::cdi::pod_contract`), the launcher pod's
//! sockets directory (`operators::kubevirt::vmi::launcher_pod`) and the control socket's
//! name (`virt::launcher::control`).

use std::path::{Path, PathBuf};

use api::cdi::pod_contract::env::{Lookup, ProcessEnv};
pub use api::cdi::pod_contract::{BLOCK_DEVICE_PATH, DATA_IMAGE_PATH, TERMINATION_LOG_PATH};
/// Set by the local node agent to the directory the pod's volumes are published under
/// (`POD_ROOT_ENV`), and to the pod's own address, where a container would listen on
/// 0.0.0.0 (`POD_IP_ENV`).
pub use standalone::node_agent::{POD_IP_ENV, POD_ROOT_ENV};

/// Where a worker pod writes its termination message instead of [`TERMINATION_LOG_PATH`]
/// when set (a test hook).
pub const TERMINATION_LOG_ENV: &str = "FERROVIRT_TERMINATION_LOG";

/// The directory of a launcher pod's `sockets` emptyDir, inside the pod.
pub const LAUNCHER_SOCKETS_DIR: &str = operators::kubevirt::vmi::launcher_pod::SOCKETS_PATH;

/// Where the kubelet keeps a launcher pod's emptyDir `sockets` on its node, `{uid}` standing
/// for the pod's UID.
pub const KUBELET_SOCKETS_DIR: &str =
    "/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~empty-dir/sockets";

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

/// The launcher's control socket, for the launcher itself.
pub fn launcher_socket() -> PathBuf {
    in_pod(LAUNCHER_SOCKETS_DIR).join(virt::launcher::control::SOCKET_NAME)
}

/// The launcher pod's sockets directory on a machine whose node agent runs the pod under
/// `pod_root`.
pub fn launcher_sockets_under(pod_root: &Path) -> PathBuf {
    under_root(pod_root, LAUNCHER_SOCKETS_DIR)
}

/// The variable `name`, unless it is unset or empty.
pub fn env(name: &str) -> Option<String> {
    ProcessEnv.var(name)
}
