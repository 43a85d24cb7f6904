//! `ferrovirt vmi run FILE`: one VirtualMachineInstance on this machine, in the
//! foreground, with no platform: the launcher's whole path without the controllers. The
//! serial console is on stdout (and stdin goes to it), Ctrl-C or SIGTERM shuts the guest
//! down gracefully (a second one kills it), and the exit status says how the domain ended.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use api::kubevirt::pod_contract;
use clap::{Args, Subcommand};

use crate::kubevirt::virt_launcher::{NodeArgs, drive, read_vmi};

#[derive(Args, Debug)]
pub struct VmiArgs {
    #[command(subcommand)]
    command: VmiCommand,
}

#[derive(Subcommand, Debug)]
enum VmiCommand {
    /// Run a VirtualMachineInstance manifest in the foreground, its serial console on
    /// stdout.
    Run(VmiRunArgs),
}

#[derive(Args, Debug)]
struct VmiRunArgs {
    /// The VirtualMachineInstance manifest (YAML or JSON).
    file: PathBuf,
    #[command(flatten)]
    node: NodeArgs,
    /// Where VMIs keep their sockets, overlays and EFI variables: `vmis/NAMESPACE_NAME`
    /// and `nvram/` under it [default: $XDG_STATE_HOME/ferrovirt, else
    /// ~/.local/state/ferrovirt].
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// The address forwarded `ports` of a masquerade interface listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pod_ip: IpAddr,
}

pub async fn run(args: VmiArgs) -> Result<()> {
    match args.command {
        VmiCommand::Run(args) => run_vmi(args).await,
    }
}

async fn run_vmi(args: VmiRunArgs) -> Result<()> {
    let vmi = read_vmi(&args.file)?;
    let namespace = vmi.metadata.namespace.clone().unwrap_or_default();
    let name = vmi.metadata.name.clone().unwrap_or_default();
    let state_dir = args.state_dir.clone().unwrap_or_else(default_state_dir);
    let run_dir = state_dir.join("vmis").join(format!("{namespace}_{name}"));
    std::fs::create_dir_all(&run_dir).with_context(|| format!("creating {}", run_dir.display()))?;
    let lock_path = state_dir
        .join("vmis")
        .join(format!("{namespace}_{name}.lock"));
    let lock = std::fs::File::create(&lock_path)
        .with_context(|| format!("creating {}", lock_path.display()))?;
    if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        bail!(
            "VMI {namespace}/{name} already runs from {} (stop it first)",
            state_dir.display()
        );
    }
    let mut settings =
        args.node
            .settings(run_dir.clone(), state_dir.join("nvram"), args.pod_ip, None);
    settings.console_on_stdio = true;
    let socket = pod_contract::control_socket(&run_dir);
    let result = drive(settings, Some(vmi), &socket).await;
    // The run directory holds what lives as long as the VMI: overlays, ISOs, sockets.
    if let Err(e) = std::fs::remove_dir_all(&run_dir) {
        tracing::warn!(dir = %run_dir.display(), error = %e, "cleaning up");
    }
    let outcome = result?;
    let message = outcome.termination_message();
    eprintln!("vmi {namespace}/{name}: {message}");
    if outcome.succeeded() {
        Ok(())
    } else {
        bail!("vmi {namespace}/{name}: {message}")
    }
}

fn default_state_dir() -> PathBuf {
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("/var/lib"))
        .join("ferrovirt")
}
