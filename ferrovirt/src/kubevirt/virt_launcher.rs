//! `ferrovirt virt-launcher`: the compute container of a VMI's launcher pod. It serves the
//! control socket (`/var/run/kubevirt/sockets/launcher-sock`) for virt-handler, starts the
//! domain on the first Sync (or at once with `--vmi`), turns SIGTERM into a graceful
//! shutdown, and exits when the domain ends, leaving a termination message that says how.
//! [`drive`] is the part `ferrovirt vmi run` shares.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use api::cdi::pod_contract::TERMINATION_LOG_PATH;
use api::kubevirt::VirtualMachineInstance;
use api::kubevirt::pod_contract::launcher_socket;
use api::pod_contract::{POD_IP_ENV, in_pod};
use clap::Args;
use tokio::signal::unix::{SignalKind, signal};
use virt::launcher::node_facts::NodeSettings;
use virt::launcher::{self, Action, LauncherSettings, Outcome, control};

/// Serial output kept on disk per VMI (twice this at most, in two files).
const CONSOLE_LOG_LIMIT: u64 = 1 << 20;

/// Where the node's QEMU, caches and registries are: shared by `virt-launcher` and
/// `vmi run`.
#[derive(Args, Debug, Clone)]
pub struct NodeArgs {
    /// The QEMU binary.
    #[arg(long, default_value = "qemu-system-x86_64")]
    pub qemu: PathBuf,
    /// Refuse software emulation (TCG) when KVM is unusable; KubeVirt's useEmulation off.
    #[arg(long)]
    pub no_emulation: bool,
    /// The node cache: the KVM probe's answer and pulled containerDisks
    /// [default: $XDG_CACHE_HOME/ferrovirt, else ~/.cache/ferrovirt].
    #[arg(long)]
    pub node_cache: Option<PathBuf>,
    /// A registry (host[:port]) containerDisks are pulled from over plain HTTP or
    /// unverified TLS; repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure_registries: Vec<String>,
    /// The backing of a volume: a claim's directory (holding disk.img) or block device, or
    /// a directory of files for configMap, secret and cloud-init secretRef volumes;
    /// repeatable.
    #[arg(long = "volume", value_name = "NAME=PATH", value_parser = parse_pair)]
    pub volumes: Vec<(String, String)>,
    /// A Linux bridge for the `bridge` binding of a network; repeatable.
    #[arg(long = "bridge", value_name = "NETWORK=BRIDGE", value_parser = parse_pair)]
    pub bridges: Vec<(String, String)>,
    /// The Linux bridge a pod interface of a secondary network is attached to (KubeVirt's
    /// `pod<hash>` names); the node agent sets these for launcher pods. `--bridge` wins for
    /// a network named in both.
    #[arg(
        long = "pod-bridge",
        value_name = "INTERFACE=BRIDGE",
        env = "FERROVIRT_POD_BRIDGES",
        value_delimiter = ',',
        value_parser = parse_pair
    )]
    pub pod_bridges: Vec<(String, String)>,
}

fn parse_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected NAME=VALUE, got {text:?}")),
    }
}

impl NodeArgs {
    /// The launcher's settings for a VMI whose private directory is `run_dir`.
    pub fn settings(
        &self,
        run_dir: PathBuf,
        nvram_dir: PathBuf,
        pod_ip: IpAddr,
        pod_layout: Option<PathBuf>,
    ) -> LauncherSettings {
        LauncherSettings {
            node: NodeSettings {
                qemu_binary: self.qemu.clone(),
                allow_emulation: !self.no_emulation,
                node_cache: self.node_cache.clone().unwrap_or_else(default_cache_dir),
                insecure_registries: self.insecure_registries.clone(),
                run_dir,
                nvram_dir,
                volume_paths: self
                    .volumes
                    .iter()
                    .map(|(k, v)| (k.clone(), PathBuf::from(v)))
                    .collect(),
                pod_layout,
                pod_ip,
                bridges: self.bridges.iter().cloned().collect::<BTreeMap<_, _>>(),
                pod_bridges: self.pod_bridges.iter().cloned().collect(),
            },
            console_log_limit: CONSOLE_LOG_LIMIT,
            console_on_stdio: false,
        }
    }
}

fn default_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/cache"))
        .join("ferrovirt")
}

#[derive(Args, Debug)]
pub struct VirtLauncherArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// Start this VMI (YAML or JSON) at once instead of waiting for virt-handler's Sync.
    #[arg(long)]
    pub vmi: Option<PathBuf>,
    /// The VMI's private directory [default: /var/run/kubevirt-private/launcher in the pod].
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
}

/// Runs the launcher pod's compute container.
pub async fn run(args: VirtLauncherArgs) -> Result<()> {
    let run_dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| in_pod("/var/run/kubevirt-private/launcher"));
    let pod_ip = std::env::var(POD_IP_ENV)
        .ok()
        .and_then(|ip| ip.parse().ok())
        .unwrap_or(IpAddr::from([0, 0, 0, 0]));
    let settings = args.node.settings(
        run_dir,
        in_pod("/var/lib/libvirt/qemu/nvram"),
        pod_ip,
        Some(in_pod("/")),
    );
    let vmi = args.vmi.as_deref().map(read_vmi).transpose()?;
    let socket = launcher_socket();
    let outcome = drive(settings, vmi, &socket).await?;
    let message = outcome.termination_message();
    let log = in_pod(TERMINATION_LOG_PATH);
    if let Err(err) = std::fs::write(&log, &message) {
        tracing::warn!(path = %log.display(), %err, "cannot write the termination message");
    }
    if outcome.succeeded() {
        Ok(())
    } else {
        bail!("{message}")
    }
}

/// Reads a VirtualMachineInstance manifest (YAML or JSON) and applies virt-api's defaults.
pub fn read_vmi(path: &Path) -> Result<VirtualMachineInstance> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value = serde_saphyr::from_str(&text)
        .with_context(|| format!("{} is not YAML or JSON", path.display()))?;
    match value.get("kind").and_then(|k| k.as_str()) {
        Some("VirtualMachineInstance") => {}
        Some("VirtualMachine") => bail!(
            "{} is a VirtualMachine; give a VirtualMachineInstance (its spec.template.spec is one)",
            path.display()
        ),
        other => bail!(
            "{} is not a VirtualMachineInstance (kind {:?})",
            path.display(),
            other.unwrap_or("missing")
        ),
    }
    let mut vmi: VirtualMachineInstance = serde_json::from_value(value)
        .with_context(|| format!("{} is not a valid VirtualMachineInstance", path.display()))?;
    if vmi.metadata.name.as_deref().is_none_or(str::is_empty) {
        bail!("{}: metadata.name is required", path.display());
    }
    vmi.metadata
        .namespace
        .get_or_insert_with(|| "default".to_owned());
    let cluster = api::kubevirt::cluster_config::ClusterConfig::default();
    api::kubevirt::default::default_instance_spec(&mut vmi.spec, &cluster);
    Ok(vmi)
}

/// Runs a launcher with its control socket at `socket` until its domain ends: syncs `vmi`
/// first when given, turns the first SIGTERM or SIGINT into a graceful shutdown and the
/// second into a kill.
pub async fn drive(
    settings: LauncherSettings,
    vmi: Option<VirtualMachineInstance>,
    socket: &Path,
) -> Result<Outcome> {
    let (handle, mut task) = launcher::spawn(settings);
    let (stop_serving, serving_stopped) = tokio::sync::oneshot::channel::<()>();
    let mut server = tokio::spawn(control::serve(
        handle.clone(),
        socket.to_path_buf(),
        async {
            let _ = serving_stopped.await;
        },
    ));
    let mut stop_serving = Some(stop_serving);
    let mut sigterm = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    // Signals that arrive while the domain starts are acted on once it runs.
    let mut signals = 0u32;
    if let Some(vmi) = vmi {
        // The clone lives only as long as the call, so the launcher can end after a failure.
        let result = {
            let caller = handle.clone();
            let sync = caller.call(Action::Sync(Box::new(vmi)));
            tokio::pin!(sync);
            loop {
                tokio::select! {
                    result = &mut sync => break result,
                    _ = sigterm.recv() => signals += 1,
                    _ = sigint.recv() => signals += 1,
                }
            }
        };
        if let Err(e) = result {
            stop(&mut stop_serving, &mut server).await;
            drop(handle);
            let _ = (&mut task).await;
            return Err(e.into());
        }
    }
    let mut acted_on = 0;
    let outcome = loop {
        if signals > acted_on {
            acted_on = signals;
            let action = if signals == 1 {
                Action::Shutdown(None)
            } else {
                Action::Kill
            };
            if let Err(launcher::LauncherError::NoDomain) = handle.call(action).await {
                // Nothing runs: stop waiting for a Sync.
                stop(&mut stop_serving, &mut server).await;
                drop(handle);
                break (&mut task).await.context("the launcher task failed")?;
            }
        }
        tokio::select! {
            outcome = &mut task => break outcome.context("the launcher task failed")?,
            _ = sigterm.recv() => signals += 1,
            _ = sigint.recv() => signals += 1,
        }
    };
    stop(&mut stop_serving, &mut server).await;
    Ok(outcome)
}

/// Stops the control socket's server and waits for it.
async fn stop(
    stop_serving: &mut Option<tokio::sync::oneshot::Sender<()>>,
    server: &mut tokio::task::JoinHandle<std::io::Result<()>>,
) {
    if let Some(stop) = stop_serving.take() {
        let _ = stop.send(());
        match server.await {
            Ok(Err(e)) => tracing::warn!(error = %e, "the control socket failed"),
            Err(e) => tracing::warn!(error = %e, "the control socket's task failed"),
            Ok(Ok(())) => {}
        }
    }
}
