//! `ferrovirt hpp-pool-mounter`: the container of a `pvcTemplate` storage pool's Deployment on
//! one node (see `operators::install::hpp::pool_mounters`). It bind-mounts the claim the
//! kubelet mounted at `--source` over the pool's path on the host, reached under
//! `--host-root` (the host's `/`, mounted with bidirectional propagation so that the mount
//! shows on the host and in the CSI driver's pods), stays while the pool is served, and
//! unmounts when it is stopped.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use ferrovirt_hostpath::mount;

#[derive(clap::Args)]
pub struct PoolMounterArgs {
    /// Where the pool's claim is mounted in this container.
    #[arg(long, default_value = "/source")]
    source: PathBuf,
    /// The pool's path on the host (absolute).
    #[arg(long)]
    target: PathBuf,
    /// Where the host's root is mounted in this container.
    #[arg(long, default_value = "/host")]
    host_root: PathBuf,
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

pub async fn run(args: PoolMounterArgs) -> anyhow::Result<()> {
    let target = on_host(&args.host_root, &args.target)?;
    if !args.source.is_dir() {
        bail!(
            "--source {}: not a directory (is the claim mounted there?)",
            args.source.display()
        );
    }
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;
    // A mounter that was killed leaves its mount behind; its successor keeps it.
    let mounted_before = mount::mount_at(&target)?.is_some();
    if mounted_before {
        tracing::info!(target = %target.display(), "the pool is mounted already");
    } else {
        mount::bind(&args.source, &target, false)?;
        tracing::info!(source = %args.source.display(), target = %target.display(), "mounted the pool");
    }
    eprintln!("pool mounted at {}", args.target.display());
    crate::up::wait_for_stop_signal().await?;
    let unmounted =
        tokio::task::spawn_blocking(move || mount::unmount_if_mounted(&target)).await??;
    tracing::info!(unmounted, "stopped");
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
