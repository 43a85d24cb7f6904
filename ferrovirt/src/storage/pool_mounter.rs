//! `ferrovirt hpp-pool-mounter`: the container of a `pvcTemplate` storage pool's Deployment on
//! one node (see `operators::install::hpp::pool_mounters`). It bind-mounts the claim the
//! kubelet mounted at `--source` over the pool's path on the host, reached under
//! `--host-root` (the host's `/`, mounted with bidirectional propagation so that the mount
//! shows on the host and in the CSI driver's pods), and stays while the pool is wanted. With
//! `--check` it only says whether the pool is mounted: the Deployment's readiness probe.
//! With `--unmount` it takes the pool's mount off the host once the pool is no longer wanted:
//! the cleanup Job the operator runs on each node when a pool goes.
//!
//! A block claim (`--device`, the device the kubelet put in the container) gets an ext4
//! filesystem first, as the CSI driver formats its volumes, and only when its first MiB is
//! blank: a device that holds anything else is refused, never formatted over.
//!
//! The claim gets a marker file naming the pool's path and the claim (`--claim`) when it is
//! mounted, so that a mount found at the path is known to be this claim's: a mount of another
//! claim at the same path (a pool renamed, or removed and added again) is never taken for it,
//! nor unmounted in its place. The mount is left in place when the mounter
//! stops: the driver keeps serving the pool's path across a mounter's restart, and a volume
//! made there must land on the claim, never in the bare host directory beneath.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use ferrovirt_hostpath::mount;

/// The marker in the claim's root; it holds the pool's path.
const MARKER: &str = ".hpp-pool";

#[derive(clap::Args)]
pub struct PoolMounterArgs {
    /// Where the pool's claim is mounted in this container (a filesystem claim).
    #[arg(long, default_value = "/source")]
    source: PathBuf,
    /// The device of the pool's claim in this container (a block claim), formatted ext4 if
    /// blank, then mounted.
    #[arg(long, conflicts_with_all = ["check", "unmount"])]
    device: Option<PathBuf>,
    /// The pool's path on the host (absolute).
    #[arg(long)]
    target: PathBuf,
    /// Where the host's root is mounted in this container.
    #[arg(long, default_value = "/host")]
    host_root: PathBuf,
    /// The name of the pool's claim, recorded in the marker and required of a mount found
    /// at the path.
    #[arg(long, default_value = "")]
    claim: String,
    /// Only check that the pool is mounted at its path (exit status 0) or not (1).
    #[arg(long, conflicts_with = "unmount")]
    check: bool,
    /// Unmount the pool's claim from its path (nothing to do if it is not mounted there; a
    /// mount of anything else is left alone).
    #[arg(long)]
    unmount: bool,
}

/// `target` as seen under `host_root`; refused unless absolute and free of `..`.
fn on_host(host_root: &Path, target: &Path) -> anyhow::Result<PathBuf> {
    let relative = target
        .strip_prefix("/")
        .with_context(|| format!("--target {}: not an absolute path", target.display()))?;
    if relative
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        bail!("--target {}: must not contain . or ..", target.display());
    }
    Ok(host_root.join(relative))
}

/// What the marker of `claim`, the pool at `target`, says.
fn marker_text(target: &Path, claim: &str) -> String {
    format!("{}\n{claim}\n", target.display())
}

/// Whether `dir` shows `claim`, the claim of the pool at `target`.
fn shows_pool(dir: &Path, target: &Path, claim: &str) -> bool {
    std::fs::read_to_string(dir.join(MARKER)).is_ok_and(|m| m == marker_text(target, claim))
}

pub async fn run(args: PoolMounterArgs) -> anyhow::Result<()> {
    let on_host = on_host(&args.host_root, &args.target)?;
    if args.check {
        if !shows_pool(&on_host, &args.target, &args.claim) {
            bail!(
                "the pool's claim is not mounted at {}",
                args.target.display()
            );
        }
        return Ok(());
    }
    if args.unmount {
        return unmount(&on_host, &args.target, &args.claim);
    }
    if args.device.is_none() && !args.source.is_dir() {
        bail!(
            "--source {}: not a directory (is the claim mounted there?)",
            args.source.display()
        );
    }
    std::fs::create_dir_all(&on_host).with_context(|| format!("creating {}", on_host.display()))?;
    if mount::mount_at(&on_host)?.is_some() {
        // A mount left by an earlier mounter of this pool is kept; anything else is not
        // covered up.
        if !shows_pool(&on_host, &args.target, &args.claim) {
            bail!(
                "{} is a mount point of something else than this pool's claim; not mounting over it",
                args.target.display()
            );
        }
        tracing::info!(target = %args.target.display(), "the pool is mounted already");
    } else {
        match &args.device {
            Some(device) => mount_device(device, &on_host, &args.target, &args.claim)?,
            None => {
                // Marked only now: a refused run must not rewrite the marker of a claim in
                // use.
                mark(&args.source, &args.target, &args.claim)?;
                mount::bind(&args.source, &on_host, false)?;
            }
        }
        tracing::info!(target = %args.target.display(), "mounted the pool's claim");
    }
    eprintln!("pool mounted at {}", args.target.display());
    crate::platform::up::wait_for_stop_signal().await?;
    Ok(())
}

/// Writes the marker of `claim`, the pool at `target`, into the claim's root `root`.
fn mark(root: &Path, target: &Path, claim: &str) -> anyhow::Result<()> {
    let marker = root.join(MARKER);
    std::fs::write(&marker, marker_text(target, claim))
        .with_context(|| format!("writing {}", marker.display()))
}

/// How much of a block claim must be blank before it is formatted: partition tables, LVM
/// labels and the superblocks of the usual filesystems (XFS, btrfs, ext) all lie within it.
const BLANK_BEFORE_FORMAT: usize = 1 << 20;

/// Mounts the ext4 filesystem of block claim `device` at `on_host` (the pool's path
/// `target`), formatting the device first if it is blank, and marks it.
fn mount_device(device: &Path, on_host: &Path, target: &Path, claim: &str) -> anyhow::Result<()> {
    use ferrovirt_hostpath::filesystem;
    if !filesystem::has_ext4(device)? {
        let mut start = vec![0u8; BLANK_BEFORE_FORMAT];
        let file =
            std::fs::File::open(device).with_context(|| format!("opening {}", device.display()))?;
        let read = read_up_to(&file, &mut start)
            .with_context(|| format!("reading {}", device.display()))?;
        if start[..read].iter().any(|b| *b != 0) {
            bail!(
                "{} holds data that is not an ext4 filesystem; not formatting it (wipe it, or \
                 use a blank claim)",
                device.display()
            );
        }
        filesystem::ensure_ext4(device)?;
        tracing::info!(device = %device.display(), "formatted the pool's block claim ext4");
    }
    mount::mount_ext4(device, on_host, &[], false)?;
    if let Err(err) = mark(on_host, target, claim) {
        let _ = mount::unmount_if_mounted(on_host);
        return Err(err);
    }
    Ok(())
}

/// Reads from the start of `file` into `buf` until it is full or the file ends.
fn read_up_to(file: &std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], filled as u64)? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// Takes the pool's claim off `on_host` (the pool's path `target` on the host), leaving
/// anything else mounted there in place.
fn unmount(on_host: &Path, target: &Path, claim: &str) -> anyhow::Result<()> {
    if mount::mount_at(on_host)?.is_none() {
        eprintln!("nothing is mounted at {}", target.display());
        return Ok(());
    }
    if !shows_pool(on_host, target, claim) {
        eprintln!(
            "{} is a mount point of something else than this pool's claim; leaving it",
            target.display()
        );
        return Ok(());
    }
    mount::unmount_if_mounted(on_host)?;
    tracing::info!(target = %target.display(), "unmounted the pool's claim");
    eprintln!("pool unmounted from {}", target.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_found_under_the_host_root_and_must_stay_there() {
        let root = Path::new("/host");
        assert_eq!(
            on_host(root, Path::new("/var/hpp/pool")).unwrap(),
            Path::new("/host/var/hpp/pool")
        );
        let relative = on_host(root, Path::new("var/pool"))
            .unwrap_err()
            .to_string();
        assert!(relative.contains("not an absolute path"), "{relative}");
        let escaping = on_host(root, Path::new("/var/../etc"))
            .unwrap_err()
            .to_string();
        assert!(escaping.contains("must not contain"), "{escaping}");
    }
}
