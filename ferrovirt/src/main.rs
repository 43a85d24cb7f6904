//! `ferrovirt`: the one user-facing binary. This is its command line (the subcommands, their
//! flags and help) and the dispatch of each to the library, where every subcommand lives in
//! a module of its own.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ferrovirt::{
    install_operators, kubevirt, network, platform, storage, templates, upload, virtctl, webhooks,
};
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "ferrovirt",
    version,
    about = "Storage and data import for virtual machines"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log verbosity as KubeVirt's components take it (what a KubeVirt CR's
    /// `customizeComponents.flags` pass as `--v N`): up to 1 warnings, 2-3 info, 4-5 debug,
    /// 6 and more trace. Overrides RUST_LOG.
    #[arg(long = "v", global = true, value_name = "LEVEL")]
    verbosity: Option<u8>,
}

/// The log filter of klog verbosity `level`.
fn verbosity_filter(level: u8) -> &'static str {
    match level {
        0..=1 => "warn",
        2..=3 => "info",
        4..=5 => "debug",
        _ => "trace",
    }
}

/// Logs to stderr, filtered by `verbosity` if given, else by RUST_LOG (warnings by default).
fn init_tracing(verbosity: Option<u8>) {
    let filter = match verbosity {
        Some(level) => EnvFilter::new(verbosity_filter(level)),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

#[derive(Subcommand)]
enum Command {
    /// Import a disk image (a file, an http(s) URL, an S3 object or a registry image; raw,
    /// qcow2, vmdk, vhd, vhdx, vdi or ISO, optionally gz/xz/zstd/bz2) to a raw file or block
    /// device, or extract a tar archive into a directory.
    Import(Box<storage::import::ImportArgs>),
    /// The importer pod entrypoint: reads CDI's importer environment, writes /data/disk.img
    /// or /dev/cdi-block-volume and a termination message.
    Importer,
    /// The CSI hostpath driver: Identity, Controller and Node services on a unix socket over
    /// this node's storage pools.
    CsiDriver(Box<storage::csi_driver::CsiDriverArgs>),
    /// The upload proxy: checks upload tokens and streams uploads to the PVC's upload server.
    UploadProxy(Box<upload::proxy::UploadProxyArgs>),
    /// The upload server pod entrypoint: reads CDI's upload server environment, takes one
    /// upload into /data/disk.img or /dev/cdi-block-volume, writes a termination message.
    UploadServer,
    /// The source pod of a host-assisted clone (CDI's cdi-cloner): streams the volume to the
    /// target's upload server over mutual TLS.
    CloneSource(storage::clone_source::CloneSourceArgs),
    /// Print an upload token for a PVC, signed with the key in a directory (as the API server
    /// answers an UploadTokenRequest).
    UploadToken(upload::proxy::UploadTokenArgs),
    /// Upload a local disk image to a DataVolume or PVC through the upload proxy, as
    /// `virtctl image-upload` (`dv NAME` or `pvc NAME`).
    ImageUpload(Box<upload::image_upload::ImageUploadArgs>),
    /// Run the DataVolume, StorageProfile, DataSource and DataImportCron controllers against a
    /// cluster.
    Controller(storage::cdi_controller::ControllerArgs),
    /// CDI's admission webhook on a cluster: DataVolume defaulting and validation, the
    /// clone permission check that issues clone tokens, and the CDI CR's uninstall guard.
    Webhook(webhooks::cdi::WebhookArgs),
    /// kubemacpool on a cluster: the VirtualMachine MAC address webhook
    /// (/mutate-virtualmachines), MAC collision detection and their metrics.
    Macpool(Box<network::macpool::MacPoolArgs>),
    /// bridge-marker on a cluster node: reports the node's Linux bridges as node resources
    /// (bridge.network.kubevirt.io/BRIDGE).
    BridgeMarker(network::bridge_marker::BridgeMarkerArgs),
    /// A pvcTemplate storage pool on one node (its Deployment's container): bind-mounts the
    /// pool's claim over the pool's path on the host until stopped.
    HppPoolMounter(storage::pool_mounter::PoolMounterArgs),
    /// cdi-operator on a cluster: the CDI CR deploys the DataVolume controllers and the
    /// admission webhook in the operator's namespace and keeps the CDIConfig to its spec.
    CdiOperator(install_operators::cdi::CdiOperatorArgs),
    /// hostpath-provisioner-operator on a cluster: the HostPathProvisioner CRs deploy the
    /// CSI driver in the operator's namespace, serving their path pools.
    HppOperator(install_operators::hpp::HppOperatorArgs),
    /// HCO on a cluster: the HyperConverged of its namespace becomes the KubeVirt, CDI,
    /// NetworkAddonsConfig and SSP CRs, whose conditions it aggregates.
    HcoOperator(install_operators::hco::HcoOperatorArgs),
    /// HCO's webhook on a cluster: the HyperConverged's checks.
    HcoWebhook(webhooks::hco::HcoWebhookArgs),
    /// SSP's operator on a cluster: each SSP CR gets the common templates, its boot sources
    /// and its status.
    SspOperator,
    /// The network addons operator on a cluster: NetworkAddonsConfig `cluster` gets the MAC
    /// pool's range and CNAO's status.
    NetworkOperator(install_operators::network::NetworkOperatorArgs),
    /// virt-operator on a cluster: each KubeVirt CR deploys virt-api, virt-controller and
    /// virt-handler in its namespace and reports them in its status; it serves the CR's
    /// uninstall guard and update review.
    VirtOperator(install_operators::kubevirt::VirtOperatorArgs),
    /// virt-controller on a cluster: the VirtualMachine and VirtualMachineInstance
    /// controllers.
    VirtController(kubevirt::virt_controller::VirtControllerArgs),
    /// virt-handler on a cluster node: follows the node's VMIs through their launchers and
    /// serves the subresources only the node can answer, for virt-api.
    VirtHandler(Box<kubevirt::virt_handler::VirtHandlerArgs>),
    /// virt-api on a cluster: the subresource API behind its APIService, and the VM and
    /// VMI admission webhooks.
    VirtApi(Box<kubevirt::virt_api::VirtApiArgs>),
    /// The compute container of a VMI's launcher pod: starts QEMU for the VMI virt-handler
    /// syncs over the control socket and owns it until the domain ends.
    VirtLauncher(Box<kubevirt::virt_launcher::VirtLauncherArgs>),
    /// VirtualMachineInstances without a platform: `vmi run FILE` runs one in the
    /// foreground.
    Vmi(Box<kubevirt::vmi_run::VmiArgs>),
    /// Start the single-machine control plane (embedded API server) and write its kubeconfig.
    Up(platform::up::UpArgs),
    /// Stop the control plane `ferrovirt up` started.
    Down(platform::up::DownArgs),
    /// Start a VirtualMachine (virtctl start).
    Start(virtctl::StartArgs),
    /// Stop a VirtualMachine: its guest is shut down through ACPI within its grace period
    /// (virtctl stop).
    Stop(virtctl::StopArgs),
    /// Restart a VirtualMachine with a new instance (virtctl restart).
    Restart(virtctl::StopArgs),
    /// Pause a VM's instance or a VMI (virtctl pause vm|vmi NAME).
    Pause(virtctl::PauseArgs),
    /// Resume a paused VM's instance or VMI (virtctl unpause vm|vmi NAME).
    Unpause(virtctl::PauseArgs),
    /// Ask the guest (agent or ACPI) to reboot (virtctl soft-reboot).
    #[command(name = "soft-reboot")]
    SoftReboot(virtctl::Target),
    /// Connect to a VMI's serial console; Ctrl+] leaves (virtctl console).
    Console(virtctl::ConsoleArgs),
    /// Serve a VMI's VNC display on a local port (virtctl vnc --proxy-only).
    Vnc(virtctl::VncArgs),
    /// Forward local ports (or stdin/stdout) to a port of a VM's guest (virtctl
    /// port-forward).
    PortForward(virtctl::PortForwardArgs),
    /// Log into a VM's guest with the system's ssh through port-forward (virtctl ssh).
    Ssh(virtctl::SshArgs),
    /// Print a manifest built from flags (virtctl create).
    #[command(subcommand)]
    Create(virtctl::Create),
    /// The guest OS as its agent reports it (virtctl guestosinfo).
    Guestosinfo(virtctl::Target),
    /// The users logged into the guest (virtctl userlist).
    Userlist(virtctl::Target),
    /// The guest's filesystems (virtctl fslist).
    Fslist(virtctl::Target),
    /// CNI plugins, run by a container runtime with the CNI_* variables and the network
    /// configuration on stdin (`cni bridge`: the linux-bridge plugin).
    #[command(subcommand)]
    Cni(ferrovirt_network::cni::CniPlugin),
    /// Process a Template into the List of its objects, as `oc process` (`-p KEY=VALUE`).
    Process(templates::process::ProcessArgs),
    /// Serve this binary as `virtctl` (`/<arch>/linux/virtctl.tar.gz`), as HCO's CLI
    /// download server.
    CliDownload(install_operators::cli_download::CliDownloadArgs),
    /// Run one of the KubeVirt tekton tasks, as its Task's step does (create-vm-from-manifest,
    /// modify-data-object, wait-for-vmi-status, execute-in-vm, cleanup-vm, generate-ssh-keys).
    #[command(subcommand)]
    Task(tekton::TaskCommand),
    /// Print the common templates bundle as a List.
    #[command(hide = true)]
    CommonTemplates(templates::process::CommonTemplatesArgs),
}

fn main() -> ExitCode {
    // Installed under a CNI plugin's name (`/opt/cni/bin/cnv-bridge` a link to this binary),
    // a runtime runs it with no arguments: it is that plugin.
    if let Some(plugin) = cni_plugin_named_by_argv0() {
        init_tracing(None);
        return match ferrovirt_network::cni::run(plugin) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    let cli = Cli::parse();
    init_tracing(cli.verbosity);
    // ssh hands the terminal to the system's ssh and exits with its status.
    let command = match cli.command {
        Command::Ssh(args) => return virtctl::ssh(args).unwrap_or_else(report),
        command => command,
    };
    let streams_stdin = matches!(
        command,
        Command::Console(_) | Command::Vnc(_) | Command::PortForward(_)
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match command {
            Command::Ssh(_) => unreachable!("run above"),
            Command::Task(task) => ferrovirt::tasks::run(task).await,
            Command::Import(args) => storage::import::run(*args).await,
            Command::Importer => storage::importer_pod::run().await,
            Command::CsiDriver(args) => storage::csi_driver::run(*args).await,
            Command::UploadProxy(args) => upload::proxy::run(*args).await,
            Command::UploadServer => upload::server::run().await,
            Command::CloneSource(args) => storage::clone_source::run(args).await,
            Command::UploadToken(args) => upload::proxy::run_token(args),
            Command::ImageUpload(args) => upload::image_upload::run(*args).await,
            Command::Controller(args) => storage::cdi_controller::run(args).await,
            Command::Webhook(args) => webhooks::cdi::run(args).await,
            Command::Macpool(args) => network::macpool::run(*args).await,
            Command::BridgeMarker(args) => network::bridge_marker::run(args).await,
            Command::HppPoolMounter(args) => storage::pool_mounter::run(args).await,
            Command::CdiOperator(args) => install_operators::cdi::run(args).await,
            Command::HppOperator(args) => install_operators::hpp::run(args).await,
            Command::VirtOperator(args) => install_operators::kubevirt::run(args).await,
            Command::HcoOperator(args) => install_operators::hco::run(args).await,
            Command::HcoWebhook(args) => webhooks::hco::run(args).await,
            Command::SspOperator => install_operators::ssp::run().await,
            Command::NetworkOperator(args) => install_operators::network::run(args).await,
            Command::VirtController(args) => kubevirt::virt_controller::run(args).await,
            Command::VirtHandler(args) => kubevirt::virt_handler::run(*args).await,
            Command::VirtApi(args) => kubevirt::virt_api::run(*args).await,
            Command::VirtLauncher(args) => kubevirt::virt_launcher::run(*args).await,
            Command::Vmi(args) => kubevirt::vmi_run::run(*args).await,
            Command::Up(args) => platform::up::up(args).await,
            Command::Down(args) => platform::up::down(args).await,
            Command::Start(args) => virtctl::start(args).await,
            Command::Stop(args) => virtctl::stop(args, "stop").await,
            Command::Restart(args) => virtctl::stop(args, "restart").await,
            Command::Pause(args) => virtctl::pause(args, true).await,
            Command::Unpause(args) => virtctl::pause(args, false).await,
            Command::SoftReboot(target) => virtctl::soft_reboot(target).await,
            Command::Console(args) => virtctl::console(args).await,
            Command::Vnc(args) => virtctl::vnc(args).await,
            Command::PortForward(args) => virtctl::port_forward(args).await,
            Command::Create(virtctl::Create::Vm(args)) => virtctl::create_vm(*args),
            Command::Create(virtctl::Create::Instancetype(args)) => {
                virtctl::create_instancetype(args)
            }
            Command::Create(virtctl::Create::Preference(args)) => virtctl::create_preference(args),
            Command::Guestosinfo(target) => virtctl::guest_info(target, "guestosinfo").await,
            Command::Userlist(target) => virtctl::guest_info(target, "userlist").await,
            Command::Fslist(target) => virtctl::guest_info(target, "filesystemlist").await,
            // The error object is on stdout already; stderr gets the one-line report.
            Command::Cni(plugin) => ferrovirt_network::cni::run(plugin).map_err(Into::into),
            Command::Process(args) => templates::process::run(args).await,
            Command::CliDownload(args) => install_operators::cli_download::run(args).await,
            Command::CommonTemplates(args) => templates::process::common_templates(args),
        }
    });
    // Whatever still runs (a task that never yields) must not keep the process alive once
    // its command is done; the streaming verbs leave a blocking read of stdin behind, which
    // must not delay their exit either.
    if streams_stdin {
        runtime.shutdown_background();
    } else {
        runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => report(err),
    }
}

/// The CNI plugin this binary stands for when it was run under that plugin's file name.
fn cni_plugin_named_by_argv0() -> Option<ferrovirt_network::cni::CniPlugin> {
    let argv0 = std::env::args_os().next()?;
    let name = std::path::Path::new(&argv0)
        .file_name()?
        .to_str()?
        .to_owned();
    matches!(name.as_str(), "cnv-bridge" | "bridge")
        .then_some(ferrovirt_network::cni::CniPlugin::Bridge)
}

/// Prints `err` as one line a person can act on (the cause chain joined with ": "); exits
/// with a failed task's upstream code, else 1.
fn report(err: anyhow::Error) -> ExitCode {
    eprintln!("error: {}", format!("{err:#}").replace('\n', " "));
    match err.downcast_ref::<tekton::TaskFailure>() {
        Some(failure) => ExitCode::from(failure.exit_status()),
        None => ExitCode::FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// klog's levels as KubeVirt's components use them: 2 is their usual info level, 4
    /// and 5 their debug levels (a `customizeComponents.flags` `v: "4"`).
    #[test]
    fn klog_verbosity_maps_onto_tracing_levels() {
        let levels: Vec<&str> = (0..=9).map(verbosity_filter).collect();
        assert_eq!(
            levels,
            [
                "warn", "warn", "info", "info", "debug", "debug", "trace", "trace", "trace",
                "trace"
            ]
        );
        // The component first, then its flags, as a customized Deployment passes them.
        let cli = Cli::try_parse_from(["ferrovirt", "ssp-operator", "--v", "4"]);
        assert!(cli.is_ok_and(|cli| cli.verbosity == Some(4)));
        let unknown = Cli::try_parse_from(["ferrovirt", "ssp-operator", "--vv", "4"]);
        assert!(unknown.is_err());
    }
}
