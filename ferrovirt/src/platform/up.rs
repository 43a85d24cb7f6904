//! `ferrovirt up` and `ferrovirt down`: the single-machine control plane. `up` starts the
//! embedded API server (in the background unless `--foreground`), writes DIR/kubeconfig and
//! DIR/ferrovirt.pid; `down` stops it.

use std::collections::HashMap;
use std::fs;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use rustix::process::{Pid, Signal, kill_process};
use standalone::control_plane::{ControlPlane, ControlPlaneConfig};

const PID_FILE: &str = "ferrovirt.pid";
/// The name of the cluster-wide CDIConfig.
const CDI_CONFIG: &str = "config";
const LOG_FILE: &str = "ferrovirt.log";
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a pod gets to stop when the platform goes down (a guest that ignores the
/// power button is killed then): a kubelet's shutdownGracePeriod.
const NODE_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long `down` waits: the pods' shutdown, their volumes' unpublishing, the API server.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the bridge marker looks at the machine's bridges: a sysfs listing, cheap enough
/// to do far more often than upstream's minute, so a new bridge is usable within seconds.
const BRIDGE_MARKER_INTERVAL: Duration = Duration::from_secs(2);
/// How often it re-reads what the Node reports (upstream's default).
const BRIDGE_MARKER_RECONCILE: Duration = Duration::from_secs(600);

#[derive(Args)]
pub struct UpArgs {
    /// Where the database, certificates, kubeconfig and volumes live
    /// [default: $FERROVIRT_DATA_DIR, else $XDG_DATA_HOME/ferrovirt, else ~/.local/share/ferrovirt].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Address of the API server (port 0 picks a free port; the kubeconfig names it).
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Address of the upload proxy (port 0 picks a free port; CDIConfig `config` names it).
    #[arg(long, default_value = "127.0.0.1:0")]
    upload_proxy_listen: SocketAddr,
    /// Stay in the foreground instead of detaching (logs go to stderr).
    #[arg(long)]
    foreground: bool,
    /// A registry (host[:port]) VMs' containerDisks are pulled from over plain HTTP or
    /// unverified TLS; repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    insecure_registries: Vec<String>,
    /// Leave out virt-controller, virt-handler and virt-api, to run them as separate
    /// processes as on a cluster (`ferrovirt virt-controller`, `virt-handler`, `virt-api`
    /// with the manifests of deploy/virt/).
    #[arg(long)]
    no_virt: bool,
    /// Seconds a MAC the pool allocated for a VirtualMachine that was never stored stays
    /// allocated (kubemacpool's --wait-time) [default: 300, as CNAO deploys it].
    #[arg(long, value_name = "SECONDS")]
    mac_pool_wait_time: Option<u64>,
    /// Address of the platform's Prometheus endpoint (`/metrics`: the MAC pool's
    /// kmp_mac_collisions, …); port 0 picks a free port, which the log names.
    #[arg(long, default_value = "127.0.0.1:0")]
    metrics_listen: SocketAddr,
}

#[derive(Args)]
pub struct DownArgs {
    /// The data directory `ferrovirt up` was started with.
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FERROVIRT_DATA_DIR") {
        return dir.into();
    }
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("ferrovirt")
}

pub async fn up(args: UpArgs) -> anyhow::Result<()> {
    let dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let fresh = fs::read_dir(&dir).map_or(true, |mut entries| entries.next().is_none());
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if let Some(pid) = running_pid(&dir) {
        bail!(
            "ferrovirt is already running from {} (pid {pid}); `{}` stops it",
            dir.display(),
            down_command(args.data_dir.as_deref())
        );
    }
    if args.foreground {
        return run_foreground(&dir, &args).await;
    }
    start_detached(&dir, &args, fresh)?;
    let kubeconfig = dir.join("kubeconfig");
    println!(
        "ferrovirt is up: export KUBECONFIG={}",
        kubeconfig.display()
    );
    Ok(())
}

/// The command that stops the platform of `data_dir` (the default one when `None`).
fn down_command(data_dir: Option<&Path>) -> String {
    match data_dir {
        Some(dir) => format!("ferrovirt down --data-dir {}", dir.display()),
        None => "ferrovirt down".into(),
    }
}

/// The pid in DIR/ferrovirt.pid if that process is alive.
fn running_pid(dir: &Path) -> Option<i32> {
    let pid: i32 = fs::read_to_string(dir.join(PID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let alive = Pid::from_raw(pid).is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
    alive.then_some(pid)
}

/// Starts the control plane in the background and waits until it is up. If it exits while
/// starting, a data directory that this start made is removed again.
fn start_detached(dir: &Path, args: &UpArgs, fresh: bool) -> anyhow::Result<()> {
    let _ = fs::remove_file(dir.join(PID_FILE));
    let log_path = dir.join(LOG_FILE);
    let log =
        fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let exe = std::env::current_exe().context("finding the ferrovirt binary")?;
    let mut child = Command::new(exe)
        .arg("up")
        .arg("--foreground")
        .arg("--data-dir")
        .arg(dir)
        .arg("--listen")
        .arg(args.listen.to_string())
        .arg("--upload-proxy-listen")
        .arg(args.upload_proxy_listen.to_string())
        .args(
            args.insecure_registries
                .iter()
                .flat_map(|r| ["--insecure-registry", r.as_str()]),
        )
        .args(args.no_virt.then_some("--no-virt"))
        .args(
            args.mac_pool_wait_time
                .map(|seconds| ["--mac-pool-wait-time".to_owned(), seconds.to_string()])
                .into_iter()
                .flatten(),
        )
        .arg("--metrics-listen")
        .arg(args.metrics_listen.to_string())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Its own process group: a Ctrl-C meant for the shell does not stop the control plane.
        .process_group(0)
        .spawn()
        .context("starting the control plane")?;
    let started = Instant::now();
    while started.elapsed() < START_TIMEOUT {
        if running_pid(dir).is_some() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            let log = fs::read_to_string(&log_path).unwrap_or_default();
            if fresh {
                let _ = fs::remove_dir_all(dir);
            }
            bail!(
                "the control plane exited ({status}) while starting:\n{}",
                log.trim()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!(
        "the control plane did not start within {START_TIMEOUT:?}; see {}",
        log_path.display()
    )
}

async fn run_foreground(dir: &Path, args: &UpArgs) -> anyhow::Result<()> {
    // CDI's API server signs upload and clone tokens with one key.
    let token_issuer = Arc::new(
        uploadproxy::UploadTokenIssuer::load_or_create(dir)
            .context("loading the token signing key")?,
    );
    // kubemacpool: loaded from the stored VMs before any VM is admitted (until then its
    // admission refuses VMs, as its webhook is unreachable until its pool is loaded).
    let mac_pool =
        crate::network::macpool::local_pool(args.mac_pool_wait_time.map(Duration::from_secs));
    // The active KubeVirt CR's configuration, for virt-api's defaulting of VMIs.
    let cluster = api::kubevirt::cluster_config::SharedClusterConfig::default();
    let config = ControlPlaneConfig {
        data_dir: dir.to_path_buf(),
        listen: args.listen,
        executable: std::env::current_exe().context("finding the ferrovirt binary")?,
        node: node_name(),
        admission: vec![
            crate::webhooks::clone_auth::clone_authorization(token_issuer.clone()),
            crate::webhooks::embedded::vmi_presets(),
            crate::webhooks::embedded::defaulting_and_validation(cluster.clone()),
            crate::webhooks::pvc_mutate::embedded(),
            crate::network::macpool::embedded_admission(&mac_pool),
        ],
        virtual_creates: HashMap::from([
            crate::upload::tokens::upload_token_requests(token_issuer.clone()),
            crate::templates::processed::processed_templates(),
        ]),
    };
    let control_plane = ControlPlane::start(config)
        .await
        .context("starting the control plane")?;
    crate::webhooks::embedded::register(&control_plane.api_server);
    crate::templates::processed::serve_resource(&control_plane.client).await?;
    let metrics =
        crate::network::macpool::start_local(&control_plane.client, &mac_pool, args.metrics_listen)
            .await?;
    eprintln!("metrics on http://{metrics}/metrics");
    start_controllers(&control_plane, dir, args, &token_issuer, &cluster).await?;
    // With --no-virt, KubeVirt's components and their operator run as on a cluster; the
    // in-process admission still follows the active KubeVirt CR's configuration.
    if args.no_virt {
        tokio::spawn(operators::install::components::follow_cluster_config(
            control_plane.client.clone(),
            cluster.clone(),
        ));
    }
    let in_process_virt = (!args.no_virt).then_some(cluster);
    start_install_operators(&control_plane.client, in_process_virt).await?;
    crate::platform::hpp::start(&control_plane);
    if !args.no_virt {
        start_handler(&control_plane, dir);
        start_bridge_marker(&control_plane);
    }
    let server = &control_plane.api_server;
    let pid_path = dir.join(PID_FILE);
    fs::write(&pid_path, std::process::id().to_string())
        .with_context(|| format!("writing {}", pid_path.display()))?;
    eprintln!(
        "API server on https://{}; kubeconfig {}",
        server.addr,
        server.kubeconfig.display()
    );
    wait_for_stop_signal().await?;
    control_plane.node_agent.shutdown(NODE_SHUTDOWN_GRACE).await;
    server.stop();
    let _ = fs::remove_file(&pid_path);
    Ok(())
}

/// The DataVolume and StorageProfile controllers against the embedded API server, the upload
/// proxy, the TaskRun and PipelineRun runners, and the cluster-wide CDIConfig `config` they and `image-upload` read; the VM
/// controllers follow `kubevirt`, which the in-process components keep current.
async fn start_controllers(
    control_plane: &ControlPlane,
    dir: &Path,
    args: &UpArgs,
    token_issuer: &uploadproxy::UploadTokenIssuer,
    kubevirt: &api::kubevirt::cluster_config::SharedClusterConfig,
) -> anyhow::Result<()> {
    seed_cdi_config(&control_plane.client).await?;
    let uploads = crate::upload::local::start(
        &control_plane.client,
        dir,
        args.upload_proxy_listen,
        CDI_CONFIG,
    )
    .await?;
    eprintln!("upload proxy on {}", uploads.proxy.url);
    crate::platform::ssp::start(&control_plane.client);
    // Tekton's PipelineRuns and TaskRuns, run in pods of this machine (a cluster has Tekton
    // Pipelines).
    tokio::spawn(tekton::runner::taskrun::run(control_plane.client.clone()));
    tokio::spawn(tekton::runner::pipeline::controller::run(
        control_plane.client.clone(),
    ));
    let client = control_plane.client.clone();
    let config = operators::ControllerConfig {
        upload_certificates: Some(uploads.certificates),
        no_cluster_dns: true,
        clone_tokens: Some(token_issuer.validator()),
        launcher_args: launcher_args(dir, args),
        kubevirt: kubevirt.clone(),
        upload_proxy: Some(uploads.proxy.clone()),
        ..Default::default()
    };
    let virt = !args.no_virt;
    tokio::spawn(async move {
        let virt_controllers = async {
            if virt {
                operators::run_virt(client.clone(), config.clone()).await
            } else {
                std::future::pending().await
            }
        };
        let stopped = tokio::select! {
            result = operators::run(client.clone(), config.clone()) => result,
            result = virt_controllers => result,
        };
        if let Err(err) = stopped {
            tracing::error!(%err, "the controllers stopped");
        }
    });
    Ok(())
}

/// HCO in its namespace, and virt-operator's and cdi-operator's reports of the in-process
/// components they would deploy on a cluster.
async fn start_install_operators(
    client: &kube::Client,
    cluster: Option<api::kubevirt::cluster_config::SharedClusterConfig>,
) -> anyhow::Result<()> {
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(client.clone());
    // HCO's own, the common templates' (OpenShift has it), the golden images' (HCO makes it).
    for name in [HCO_NAMESPACE, "openshift", "kubevirt-os-images"] {
        let namespace: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?;
        match namespaces.create(&Default::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(err) => return Err(err).with_context(|| format!("creating namespace {name}")),
        }
    }
    // Launchers here fall back to TCG when KVM is unusable, as useEmulation allows.
    let settings = operators::install::hco::Settings {
        namespace: HCO_NAMESPACE.to_owned(),
        use_emulation: true,
        cli_download: operators::install::hco::cli_download::Server::LocalPod,
    };
    tokio::spawn(operators::install::hco::run(client.clone(), settings));
    tokio::spawn(operators::install::components::run(client.clone(), cluster));
    Ok(())
}

/// The namespace HCO watches (its operator namespace upstream).
const HCO_NAMESPACE: &str = "kubevirt-hyperconverged";

/// What every launcher pod of this machine is started with: the node cache in the data
/// directory, and the registries to pull containerDisks from without TLS checks.
fn launcher_args(dir: &Path, args: &UpArgs) -> Vec<String> {
    let mut launcher = vec![
        "--node-cache".to_owned(),
        dir.join("node").join("cache").display().to_string(),
    ];
    for registry in &args.insecure_registries {
        launcher.extend(["--insecure-registry".to_owned(), registry.clone()]);
    }
    launcher
}

/// virt-handler for this machine, and virt-api's subresources as an aggregated API of the
/// embedded server; both reach each launcher's control socket under the node agent's root
/// of the launcher pod.
fn start_handler(control_plane: &ControlPlane, dir: &Path) {
    let state_dir = dir.join("node");
    let socket_dir: virt::handler::SocketDirOf =
        Arc::new(move |pod: &k8s_openapi::api::core::v1::Pod| {
            use kube::ResourceExt;
            api::kubevirt::pod_contract::sockets_dir_under(&standalone::node_agent::pod_root(
                &state_dir,
                &pod.uid().unwrap_or_default(),
            ))
        });
    let launchers = virt::handler::Launchers::new(control_plane.client.clone(), socket_dir);
    let handler = virt::handler::Handler {
        client: control_plane.client.clone(),
        node: node_name(),
        launchers: launchers.clone(),
    };
    tokio::spawn(handler.run());
    let subresources = virt::subresources::router(virt::subresources::Subresources {
        client: control_plane.client.clone(),
        launchers,
    });
    control_plane.api_server.register_aggregated_api(
        standalone::apiserver::AggregatedApi::from_tower(
            virt::subresources::GROUP,
            virt::subresources::VERSIONS.map(str::to_owned).to_vec(),
            virt::subresources::discovery_resources(),
            subresources,
        ),
    );
}

/// The bridge marker of this machine's node: its Linux bridges become node resources that
/// launcher pods on bridge networks request. With no kubelet to copy capacity into
/// allocatable, the marker writes both.
fn start_bridge_marker(control_plane: &ControlPlane) {
    let settings = ferrovirt_network::bridge_marker::MarkerSettings {
        node: node_name(),
        interval: BRIDGE_MARKER_INTERVAL,
        reconcile_interval: BRIDGE_MARKER_RECONCILE,
        mirror_allocatable: true,
    };
    tokio::spawn(ferrovirt_network::bridge_marker::run(
        control_plane.client.clone(),
        settings,
    ));
}

/// Creates the CDIConfig `config` (CDI's operator does this on a cluster) unless it exists.
async fn seed_cdi_config(client: &kube::Client) -> anyhow::Result<()> {
    let configs: kube::Api<api::cdi::CDIConfig> = kube::Api::all(client.clone());
    if configs.get_opt(CDI_CONFIG).await?.is_some() {
        return Ok(());
    }
    let config: api::cdi::CDIConfig = serde_json::from_value(serde_json::json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "CDIConfig",
        "metadata": {"name": CDI_CONFIG},
        "spec": {},
    }))?;
    match configs.create(&Default::default(), &config).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err).context("creating the CDIConfig config"),
    }
}

/// This machine's name, as its Node is called.
fn node_name() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_lowercase())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

pub(crate) async fn wait_for_stop_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}

pub async fn down(args: DownArgs) -> anyhow::Result<()> {
    let dir = args.data_dir.unwrap_or_else(default_data_dir);
    let Some(pid) = running_pid(&dir) else {
        bail!("ferrovirt is not running from {}", dir.display());
    };
    let process = Pid::from_raw(pid).context("invalid pid file")?;
    kill_process(process, Signal::TERM).with_context(|| format!("stopping pid {pid}"))?;
    let started = Instant::now();
    while started.elapsed() < STOP_TIMEOUT {
        if running_pid(&dir).is_none() {
            let _ = fs::remove_file(dir.join(PID_FILE));
            println!("ferrovirt is down");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("pid {pid} did not stop within {STOP_TIMEOUT:?}")
}
