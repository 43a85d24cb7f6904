//! The fixed paths of a pod (/data, /dev/cdi-block-volume, /dev/termination-log), resolved
//! under `FERROVIRT_POD_ROOT` when the local node agent runs the pod as a process rather
//! than in a container with its own mount namespace.

use std::path::PathBuf;

/// Set by the local node agent to the directory the pod's volumes are published under.
pub const POD_ROOT_ENV: &str = "FERROVIRT_POD_ROOT";
/// Set by the local node agent to the pod's own address, where a container would listen on
/// 0.0.0.0.
pub const POD_IP_ENV: &str = "FERROVIRT_POD_IP";

/// Where the in-pod path `path` is for this process.
pub fn in_pod(path: &str) -> PathBuf {
    match std::env::var_os(POD_ROOT_ENV) {
        Some(root) if !root.is_empty() => PathBuf::from(root).join(path.trim_start_matches('/')),
        _ => PathBuf::from(path),
    }
}
