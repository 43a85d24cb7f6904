//! Network namespaces: opening one by path, and running netlink work inside it on a thread
//! dedicated to it. `setns(2)` changes the namespace of the calling thread only, so each
//! piece of work gets a fresh thread that enters the namespace, owns a current-thread tokio
//! runtime with its own netlink socket (created inside the namespace, so bound to it), and
//! ends with the work: no shared worker ever changes namespace.

use std::fs::File;
use std::future::Future;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

use super::error::{CniError, code};
use super::netlink::Netlink;

/// `statfs` magic of nsfs (namespace files, bind-mounted under /run/netns) and of procfs
/// (/proc/PID/ns/net).
const NSFS_MAGIC: i64 = 0x6e73_6673;
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// Why a namespace path could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("network namespace {0:?} does not exist")]
    Missing(PathBuf),
    #[error("{0:?} is not a network namespace")]
    NotNetns(PathBuf),
    #[error("cannot open network namespace {0:?}: {1}")]
    Io(PathBuf, io::Error),
}

impl From<NetnsError> for CniError {
    fn from(e: NetnsError) -> Self {
        let code = match e {
            NetnsError::Missing(_) => code::UNKNOWN_CONTAINER,
            NetnsError::NotNetns(_) => code::INVALID_NETNS,
            NetnsError::Io(..) => code::INTERNAL,
        };
        CniError::new(code, format!("failed to open netns: {e}"))
    }
}

/// An open network namespace.
#[derive(Debug)]
pub struct Netns {
    path: PathBuf,
    file: File,
}

impl Netns {
    /// Opens the namespace at `path` (for example /run/netns/NAME or /proc/PID/ns/net).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, NetnsError> {
        let path = path.as_ref().to_path_buf();
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(NetnsError::Missing(path)),
            Err(e) => return Err(NetnsError::Io(path, e)),
        };
        let fs = rustix::fs::fstatfs(&file).map_err(|e| NetnsError::Io(path.clone(), e.into()))?;
        #[allow(clippy::unnecessary_cast)] // f_type's width differs between architectures
        let magic = fs.f_type as i64;
        if magic != NSFS_MAGIC && magic != PROC_SUPER_MAGIC {
            return Err(NetnsError::NotNetns(path));
        }
        Ok(Netns { path, file })
    }

    /// The namespace of the calling thread.
    pub fn current() -> Result<Self, NetnsError> {
        Self::open("/proc/thread-self/ns/net")
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A second descriptor of the namespace (for IFLA_NET_NS_FD or another thread).
    pub fn fd(&self) -> Result<OwnedFd, CniError> {
        self.file.as_fd().try_clone_to_owned().map_err(|e| {
            CniError::internal(format!(
                "cannot duplicate the descriptor of {:?}: {e}",
                self.path
            ))
        })
    }
}

/// Runs `work` with a netlink connection in `netns` (the plugin's own namespace when
/// `None`), on a thread of its own, and waits for it.
pub fn run_in<T, F, Fut>(netns: Option<&Netns>, work: F) -> Result<T, CniError>
where
    T: Send + 'static,
    F: FnOnce(Netlink) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, CniError>>,
{
    let target = match netns {
        Some(ns) => Some((ns.fd()?, ns.path().to_path_buf())),
        None => None,
    };
    let thread = std::thread::Builder::new()
        .name("cni-netns".to_owned())
        .spawn(move || -> Result<T, CniError> {
            if let Some((fd, path)) = &target {
                move_into_link_name_space(fd.as_fd(), Some(LinkNameSpaceType::Network)).map_err(
                    |e| CniError::internal(format!("cannot enter network namespace {path:?}: {e}")),
                )?;
            }
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()
                .map_err(|e| CniError::internal(format!("cannot start a netlink runtime: {e}")))?;
            runtime.block_on(async move {
                let (connection, handle, _) = rtnetlink::new_connection().map_err(|e| {
                    CniError::internal(format!("cannot open a netlink socket: {e}"))
                })?;
                let connection = tokio::spawn(connection);
                let outcome = work(Netlink::new(handle)).await;
                connection.abort();
                outcome
            })
        })
        .map_err(|e| CniError::internal(format!("cannot start a namespace thread: {e}")))?;
    thread
        .join()
        .unwrap_or_else(|_| Err(CniError::internal("a namespace thread panicked")))
}
