//! Unix sockets at paths longer than `sockaddr_un` holds (107 bytes and a NUL). A launcher
//! pod's directories sit under the node agent's pod root, which can be long, so:
//! QEMU's sockets go in a short directory named after the VMI's run directory when the run
//! directory itself is too deep, and the launcher's control socket is bound and reached
//! through `/proc/self/fd/N/NAME`, a short path to the same place.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The longest path a unix socket address holds.
pub const MAX_SOCKET_PATH: usize = 107;
/// The longest socket name QEMU's sockets use (`guest-agent.qemu`), with its slash.
const LONGEST_QEMU_SOCKET: usize = 17;

/// Where short socket directories are made, in order of preference.
fn short_bases() -> [PathBuf; 2] {
    [
        PathBuf::from("/run/ferrovirt/sockets"),
        std::env::temp_dir().join("ferrovirt-sockets"),
    ]
}

/// Where the sockets of the VMI whose private directory is `run_dir` go: `run_dir` when
/// they fit, else `/run/ferrovirt/sockets/<hash of run_dir>` (the temp directory when /run
/// is not writable), created private to this user.
pub fn socket_dir(run_dir: &Path) -> io::Result<PathBuf> {
    if run_dir.as_os_str().len() + LONGEST_QEMU_SOCKET <= MAX_SOCKET_PATH {
        return Ok(run_dir.to_path_buf());
    }
    let digest = Sha256::digest(run_dir.as_os_str().as_encoded_bytes());
    let name = hex::encode(&digest[..8]);
    let mut last = None;
    for base in short_bases() {
        let dir = base.join(&name);
        match std::fs::create_dir_all(&dir) {
            Ok(()) => {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
                return Ok(dir);
            }
            Err(err) => last = Some(err),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no directory for sockets")))
}

/// Removes a socket directory [`socket_dir`] made outside the run directory, once its
/// sockets are no longer needed (nothing else would: /run outlives the pod).
pub fn remove_socket_dir(dir: &Path) {
    let made_here = short_bases()
        .iter()
        .any(|base| dir.parent() == Some(base.as_path()));
    if made_here && let Err(err) = std::fs::remove_dir_all(dir) {
        tracing::warn!(dir = %dir.display(), %err, "cannot remove the socket directory");
    }
}

/// A path to `path` short enough for a socket address, and the directory handle that keeps
/// it valid (`None` when `path` is short already).
fn reachable(path: &Path) -> io::Result<(PathBuf, Option<OwnedFd>)> {
    if path.as_os_str().len() <= MAX_SOCKET_PATH {
        return Ok((path.to_path_buf(), None));
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a socket path", path.display()),
        ));
    };
    let fd = rustix::fs::open(
        dir,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())).join(name);
    Ok((short, Some(fd)))
}

/// Binds a listening unix socket at `path`, however long.
pub fn bind(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    let (short, _dir) = reachable(path)?;
    std::os::unix::net::UnixListener::bind(short)
}

/// Connects to the unix socket at `path`, however long.
pub async fn connect(path: &Path) -> io::Result<tokio::net::UnixStream> {
    let (short, _dir) = reachable(path)?;
    tokio::net::UnixStream::connect(short).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_socket_deeper_than_an_address_holds_binds_and_connects() {
        let base = tempfile::tempdir().expect("temp dir");
        let deep = base.path().join("d".repeat(60)).join("e".repeat(60));
        std::fs::create_dir_all(&deep).expect("deep dir");
        let path = api::kubevirt::pod_contract::control_socket(&deep);
        assert!(path.as_os_str().len() > MAX_SOCKET_PATH);
        let listener = bind(&path).expect("bind");
        assert!(path.exists(), "the socket is where it was asked for");
        listener.set_nonblocking(true).expect("nonblocking");
        let listener = tokio::net::UnixListener::from_std(listener).expect("listener");
        let (client, server) = tokio::join!(connect(&path), listener.accept());
        client.expect("connect");
        server.expect("accept");
    }

    #[test]
    fn a_deep_run_directory_gets_a_short_socket_directory() {
        let short = Path::new("/run/vmi");
        assert_eq!(socket_dir(short).expect("dir"), short);
        let deep = PathBuf::from(format!("/tmp/{}/launcher", "x".repeat(100)));
        let dir = socket_dir(&deep).expect("dir");
        assert!(
            dir.as_os_str().len() + LONGEST_QEMU_SOCKET <= MAX_SOCKET_PATH,
            "{}",
            dir.display()
        );
        assert_eq!(
            socket_dir(&deep).expect("dir"),
            dir,
            "the same VMI gets the same directory"
        );
        remove_socket_dir(&dir);
        assert!(!dir.exists(), "removed at the end");
    }
}
