//! The contract of the virt-launcher pod, defined once: where its control socket is, inside
//! the pod (for the launcher), on a kubelet's node and under the local node agent's pod root
//! (for virt-handler). virt-controller mounts the sockets volume, the launcher listens on
//! the socket, virt-handler connects to it; all three take the names from here.

use std::path::{Path, PathBuf};

use crate::pod_contract::{in_pod, under_root};

/// The launcher pod's emptyDir holding its control socket.
pub const SOCKETS_VOLUME: &str = "sockets";
/// Where [`SOCKETS_VOLUME`] is mounted in the pod.
pub const SOCKETS_PATH: &str = "/var/run/kubevirt/sockets";
/// KubeVirt's name of the launcher's command socket, in [`SOCKETS_PATH`].
pub const CONTROL_SOCKET_NAME: &str = "launcher-sock";

/// Where the kubelet keeps a launcher pod's emptyDir `sockets` on its node, `{uid}` standing
/// for the pod's UID.
pub const KUBELET_SOCKETS_DIR: &str =
    "/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~empty-dir/sockets";

/// The control socket in the sockets directory `sockets_dir`.
pub fn control_socket(sockets_dir: &Path) -> PathBuf {
    sockets_dir.join(CONTROL_SOCKET_NAME)
}

/// The launcher's control socket, for the launcher itself.
pub fn launcher_socket() -> PathBuf {
    control_socket(&in_pod(SOCKETS_PATH))
}

/// The launcher pod's sockets directory on a machine whose node agent runs the pod under
/// `pod_root`.
pub fn sockets_dir_under(pod_root: &Path) -> PathBuf {
    under_root(pod_root, SOCKETS_PATH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_control_socket_under_a_pod_root_is_kubevirts() {
        assert_eq!(
            control_socket(&sockets_dir_under(Path::new("/pods/1"))),
            PathBuf::from("/pods/1/var/run/kubevirt/sockets/launcher-sock")
        );
    }
}
