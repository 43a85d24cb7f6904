//! ISO9660 images of small file sets (cloud-init data, ConfigMaps, Secrets), made with
//! `xorrisofs`, the tool KubeVirt's launcher runs, with the same flags (Joliet and Rock
//! Ridge names, cylinder alignment), so guests see the same media. No Rust crate writes
//! ISO9660 with Rock Ridge and Joliet that is maintained well enough to stand in for it.
//! An ISO is written under `.staging` and renamed, so a half-written one is never used.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// KubeVirt gives `xorrisofs` this long.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A file to put in an ISO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsoFile {
    /// Its path inside the ISO, `/`-separated, relative.
    pub path: String,
    pub contents: Vec<u8>,
}

impl IsoFile {
    pub fn new(path: &str, contents: Vec<u8>) -> Self {
        Self {
            path: path.to_owned(),
            contents,
        }
    }
}

/// Why an ISO could not be made.
#[derive(Debug, thiserror::Error)]
pub enum IsoError {
    #[error("xorrisofs is not installed (Debian package xorriso): {0}")]
    ToolMissing(std::io::Error),
    #[error("xorrisofs failed making {iso}: {stderr}")]
    Failed { iso: PathBuf, stderr: String },
    #[error("xorrisofs took more than {}s making {iso}", TIMEOUT.as_secs())]
    TimedOut { iso: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0:?} is not a relative path inside the ISO")]
    BadPath(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> IsoError + '_ {
    move |source| IsoError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `files` into an ISO at `iso` labelled `label`.
pub async fn write_iso(iso: &Path, label: &str, files: &[IsoFile]) -> Result<(), IsoError> {
    let parent = iso.parent().unwrap_or(Path::new("."));
    let staging_dir = tempfile::Builder::new()
        .prefix(".iso-data-")
        .tempdir_in(parent)
        .map_err(io(parent))?;
    for file in files {
        let relative = Path::new(&file.path);
        if relative.is_absolute()
            || relative
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(IsoError::BadPath(file.path.clone()));
        }
        let target = staging_dir.path().join(relative);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        std::fs::write(&target, &file.contents).map_err(io(&target))?;
    }
    let source = staging_dir.path().to_string_lossy().into_owned();
    run_xorrisofs(iso, label, &[source]).await
}

/// Writes the files of `dir` (following symbolic links, as a mounted ConfigMap or Secret
/// is made of them) into an ISO at `iso` labelled `label`. Kubernetes' own `..data`
/// entries are left out.
pub async fn write_directory_iso(iso: &Path, label: &str, dir: &Path) -> Result<(), IsoError> {
    let mut grafts = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<Result<_, _>>()
        .map_err(io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("..") {
            continue;
        }
        // Graft points are `name=path`; `=` and `\` in either are escaped with `\`.
        let escape = |s: &str| s.replace('\\', "\\\\").replace('=', "\\=");
        grafts.push(format!(
            "{}={}",
            escape(&name),
            escape(&entry.path().to_string_lossy())
        ));
    }
    let mut args = vec!["-follow-links".to_owned(), "-graft-points".to_owned()];
    args.extend(grafts);
    if args.len() == 2 {
        // An empty ConfigMap still makes a (valid, empty) ISO.
        let empty = tempfile::tempdir().map_err(io(dir))?;
        return run_xorrisofs(iso, label, &[empty.path().to_string_lossy().into_owned()]).await;
    }
    run_xorrisofs(iso, label, &args).await
}

async fn run_xorrisofs(iso: &Path, label: &str, sources: &[String]) -> Result<(), IsoError> {
    let mut staging = iso.as_os_str().to_owned();
    staging.push(".staging");
    let staging = PathBuf::from(staging);
    let mut command = Command::new("xorrisofs");
    command
        .arg("-output")
        .arg(&staging)
        .args([
            "-volid",
            label,
            "-joliet",
            "-rock",
            "-partition_cyl_align",
            "on",
        ])
        .args(sources)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().map_err(IsoError::ToolMissing)?;
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| IsoError::TimedOut {
            iso: iso.to_path_buf(),
        })?
        .map_err(io(iso))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&staging);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("no message")
            .to_owned();
        return Err(IsoError::Failed {
            iso: iso.to_path_buf(),
            stderr: last,
        });
    }
    std::fs::rename(&staging, iso).map_err(io(iso))
}
