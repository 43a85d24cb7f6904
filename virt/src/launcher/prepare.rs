//! Carries out a domain's [`PrepareStep`]s before QEMU starts: sparse images, qcow2
//! overlays (with `qemu-img`, as KubeVirt makes them), cloud-init and config ISOs, EFI
//! variable stores, and tap devices on bridges.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

use crate::cloudinit::{self, CloudInitError};
use crate::domain::{PrepareStep, TapDevice};
use crate::iso::{IsoError, write_directory_iso};

/// Why a file the domain needs could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("{field}: cannot create {path} ({size} bytes): {source}")]
    CreateImage {
        field: String,
        path: PathBuf,
        size: u64,
        source: std::io::Error,
    },
    #[error("{what} is missing: {path}")]
    Missing { what: String, path: PathBuf },
    #[error("qemu-img failed making the overlay {path}: {message}")]
    Overlay { path: PathBuf, message: String },
    #[error(transparent)]
    CloudInit(#[from] CloudInitError),
    #[error("{label} ISO from {dir}: {source}")]
    DirectoryIso {
        label: String,
        dir: PathBuf,
        source: IsoError,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("tap {tap} on bridge {bridge}: {message}")]
    Tap {
        tap: String,
        bridge: String,
        message: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PrepareError + '_ {
    move |source| PrepareError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Carries out `steps` in order.
pub async fn prepare(steps: &[PrepareStep]) -> Result<(), PrepareError> {
    for step in steps {
        match step {
            PrepareStep::SparseImageIfMissing { path, size, field } => {
                sparse_image(path, *size).map_err(|source| PrepareError::CreateImage {
                    field: field.clone(),
                    path: path.clone(),
                    size: *size,
                    source,
                })?;
            }
            PrepareStep::MustExist { path, what } => {
                if !path.exists() {
                    return Err(PrepareError::Missing {
                        what: what.clone(),
                        path: path.clone(),
                    });
                }
            }
            PrepareStep::Qcow2Overlay { path, backing } => overlay(path, backing).await?,
            PrepareStep::CloudInitIso { path, data } => cloudinit::write(data, path).await?,
            PrepareStep::DirectoryIso { path, label, dir } => write_directory_iso(path, label, dir)
                .await
                .map_err(|source| PrepareError::DirectoryIso {
                    label: label.clone(),
                    dir: dir.clone(),
                    source,
                })?,
            PrepareStep::CopyIfMissing { from, to } => {
                if !to.exists() {
                    if let Some(parent) = to.parent() {
                        std::fs::create_dir_all(parent).map_err(io(parent))?;
                    }
                    let staging = to.with_extension("staging");
                    std::fs::copy(from, &staging).map_err(io(from))?;
                    std::fs::rename(&staging, to).map_err(io(to))?;
                }
            }
            PrepareStep::WriteFile { path, contents } => {
                std::fs::write(path, contents).map_err(io(path))?;
            }
        }
    }
    Ok(())
}

/// Creates `path` as a sparse file of `size` bytes unless it exists.
fn sparse_image(path: &Path, size: u64) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.set_len(size)?;
    file.sync_all()
}

/// A fresh qcow2 overlay at `path` over the raw image `backing`, which stays untouched.
async fn overlay(path: &Path, backing: &Path) -> Result<(), PrepareError> {
    if !backing.exists() {
        return Err(PrepareError::Missing {
            what: "the image under an overlay".into(),
            path: backing.to_path_buf(),
        });
    }
    let _ = std::fs::remove_file(path);
    let output = Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2", "-F", "raw", "-b"])
        .arg(backing)
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| PrepareError::Overlay {
            path: path.to_path_buf(),
            message: format!("cannot run qemu-img (Debian package qemu-utils): {e}"),
        })?;
    if !output.status.success() {
        return Err(PrepareError::Overlay {
            path: path.to_path_buf(),
            message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(())
}

/// Creates `tap` and attaches it to its bridge, up. With a pod port, the bridge is the
/// launcher's own in the pod, made here (unless a restart made it already) with the pod
/// interface as its other port, as KubeVirt's in-pod bridge: the pod interface gets a new
/// MAC address, since the guest takes over its old one and a bridge port's own address would
/// swallow the guest's frames.
pub async fn create_tap(tap: &TapDevice) -> Result<(), PrepareError> {
    let fail = |message: String| PrepareError::Tap {
        tap: tap.name.clone(),
        bridge: tap.bridge.clone(),
        message,
    };
    if let Some(port) = &tap.pod_port {
        if !Path::new("/sys/class/net").join(&tap.bridge).exists() {
            ip(
                &["link", "add", "name", &tap.bridge, "type", "bridge"],
                &fail,
            )
            .await?;
        }
        let mac = fresh_mac().map_err(|e| fail(format!("a new MAC for {port}: {e}")))?;
        ip(
            &[
                "link",
                "set",
                "dev",
                port,
                "address",
                &mac,
                "master",
                &tap.bridge,
                "up",
            ],
            &fail,
        )
        .await?;
        ip(&["link", "set", "dev", &tap.bridge, "up"], &fail).await?;
    }
    ip(&["tuntap", "add", "dev", &tap.name, "mode", "tap"], &fail).await?;
    ip(
        &["link", "set", "dev", &tap.name, "master", &tap.bridge, "up"],
        &fail,
    )
    .await
}

/// Runs `ip ARGS`; its complaint as the error.
async fn ip(args: &[&str], fail: &impl Fn(String) -> PrepareError) -> Result<(), PrepareError> {
    let output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| fail(format!("cannot run ip (Debian package iproute2): {e}")))?;
    if !output.status.success() {
        return Err(fail(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

/// A random locally administered unicast MAC address.
fn fresh_mac() -> std::io::Result<String> {
    let mut bytes = [0u8; 5];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty())?;
    let [a, b, c, d, e] = bytes;
    Ok(format!("02:{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}"))
}

/// Removes `tap`; failures are only logged, the tap may already be gone with QEMU.
pub async fn remove_tap(tap: &TapDevice) {
    let result = Command::new("ip")
        .args(["tuntap", "del", "dev", &tap.name, "mode", "tap"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    if let Err(error) = result {
        tracing::warn!(tap = %tap.name, %error, "removing the tap");
    }
}
