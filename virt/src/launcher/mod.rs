//! The launcher: the process that owns one VMI's QEMU. Every request (from the control
//! socket, a signal, `ferrovirt vmi run`) is one value of the closed [`Action`] enum,
//! handled in one place, one at a time, by the task [`spawn`] starts; QMP events and
//! QEMU's exit arrive in the same loop. The launcher never outlives its domain (the task
//! ends when QEMU exits) and the domain never outlives the launcher (QEMU is started with
//! the parent-death signal SIGKILL and killed when the task is dropped).
//!
//! Shutdown policy: the ACPI power button is pressed at once and again every 5 s; when the
//! grace period ends, QEMU is killed and the domain is reported destroyed.

pub mod agent_credentials;
pub mod console;
pub mod control;
pub mod node_facts;
pub mod prepare;
mod qemu;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::kubevirt::VirtualMachineInstance;
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::domain::{self, Domain, DomainError};
use crate::guest_agent::{GuestAgent, GuestInfo};
use crate::qmp::{Event, Qmp, QmpError};
use console::Console;
use node_facts::{FactsError, NodeSettings};
use prepare::PrepareError;
use qemu::QemuProcess;

/// How often the power button is pressed again while the guest shuts down.
const POWER_BUTTON_REPEAT: Duration = Duration::from_secs(5);
/// KubeVirt's default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// How often the guest agent is asked for news.
const AGENT_POLL: Duration = Duration::from_secs(3);

/// Everything the launcher is asked to do.
#[derive(Debug)]
pub enum Action {
    /// Start the VMI's domain, or, when it runs, check it is the same VMI.
    Sync(Box<VirtualMachineInstance>),
    Pause,
    Unpause,
    /// Press the power button until the guest is off, then kill it when the grace period
    /// (the VMI's when `None`) ends.
    Shutdown(Option<Duration>),
    /// Kill QEMU now.
    Kill,
    /// Reset the machine.
    Reset,
    /// Ask the guest to reboot: through its agent, else through the power button with
    /// the machine reset when the guest has powered off (libvirt's ACPI reboot).
    SoftReboot,
    GetDomain,
    GetGuestInfo,
    Ping,
    /// Make the guest's `protocol` `port` reachable on the pod's address.
    ForwardPort {
        protocol: &'static str,
        port: u16,
    },
}

/// The answer to an [`Action`].
#[derive(Debug, Clone)]
pub enum Reply {
    Done,
    Domain(Box<DomainStatus>),
    GuestInfo(Option<Box<GuestInfo>>),
}

/// Why an action failed.
#[derive(Debug, thiserror::Error)]
pub enum LauncherError {
    #[error(transparent)]
    Facts(#[from] FactsError),
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    #[error("QEMU failed to start: {0}")]
    QemuStart(String),
    #[error(transparent)]
    Qmp(#[from] QmpError),
    #[error("no domain: the VMI has not been synced")]
    NoDomain,
    #[error("a different VMI ({0}) runs in this launcher")]
    OtherVmi(String),
    #[error("VMI does not have guest agent connected")]
    NoGuestAgent,
    #[error("the guest agent: {0}")]
    GuestAgent(String),
    #[error("the launcher has stopped")]
    Stopped,
    #[error("the guest is being shut down")]
    ShuttingDown,
    #[error(
        "the VMI has no masquerade interface on the pod network: ports are forwarded only through one"
    )]
    NoForwardRoute,
    #[error("forwarding {rule}: {message}")]
    PortForward { rule: String, message: String },
}

impl LauncherError {
    /// A short name of the error, for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Facts(_) => "facts",
            Self::Domain(e) => e.metric_label(),
            Self::Prepare(_) => "prepare",
            Self::QemuStart(_) => "qemu_start",
            Self::Qmp(_) => "qmp",
            Self::NoDomain => "no_domain",
            Self::OtherVmi(_) => "other_vmi",
            Self::NoGuestAgent => "no_guest_agent",
            Self::GuestAgent(_) => "guest_agent",
            Self::Stopped => "stopped",
            Self::ShuttingDown => "shutting_down",
            Self::NoForwardRoute | Self::PortForward { .. } => "port_forward",
        }
    }
}

/// The domain's life-cycle state, in KubeVirt's (libvirt's) terms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LifeCycle {
    #[default]
    NoState,
    Running,
    Paused,
    ShuttingDown,
    Shutoff,
    Crashed,
}

/// What `GetDomain` reports (as JSON, read back by virt-handler and virt-api).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DomainStatus {
    /// `namespace_name`.
    pub name: String,
    pub uuid: String,
    pub state: LifeCycle,
    /// Why: `User` (paused by a user), `IOError`, `StartingUp`, …
    pub reason: String,
    /// Whether the guest runs under TCG (the VMI's `SoftwareEmulation` condition).
    pub software_emulation: bool,
    pub guest_agent_connected: bool,
    /// How the agent's propagation of `spec.accessCredentials` went, when there are any.
    pub access_credentials: Option<agent_credentials::SyncResult>,
    pub qemu_pid: Option<u32>,
    /// The serial console clients attach to.
    pub console_socket: Option<PathBuf>,
    pub vnc_socket: Option<PathBuf>,
    /// Where this launcher differs from KubeVirt for this VMI.
    pub warnings: Vec<String>,
}

/// How the domain ended: the launcher's exit and termination message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The guest powered itself off (or obeyed the power button).
    ShutDown,
    /// QEMU was killed: at the end of the grace period, or on request.
    Destroyed { after_grace: Option<Duration> },
    /// The guest kernel panicked.
    Panicked,
    /// QEMU died on its own.
    Crashed { message: String },
    /// No domain was ever started and the launcher was told to stop.
    NeverStarted,
}

impl Outcome {
    /// One line saying how the domain ended.
    pub fn termination_message(&self) -> String {
        match self {
            Self::ShutDown => "shut down: the guest powered off".to_owned(),
            Self::Destroyed {
                after_grace: Some(grace),
            } => format!(
                "destroyed: the guest did not power off within the grace period of {}s and was killed",
                grace.as_secs()
            ),
            Self::Destroyed { after_grace: None } => "destroyed: killed on request".to_owned(),
            Self::Panicked => "crashed: the guest kernel panicked".to_owned(),
            Self::Crashed { message } => format!("crashed: QEMU exited unexpectedly: {message}"),
            Self::NeverStarted => "no domain was started".to_owned(),
        }
    }

    /// Whether the VMI ends Succeeded (else Failed), as KubeVirt decides: a guest that
    /// shut down succeeded; a crash, a panic or a kill of an ACPI guest failed.
    pub fn succeeded(&self) -> bool {
        matches!(self, Self::ShutDown | Self::NeverStarted)
    }
}

type Request = (Action, oneshot::Sender<Result<Reply, LauncherError>>);

/// A handle to a running launcher.
#[derive(Clone)]
pub struct LauncherHandle {
    requests: mpsc::Sender<Request>,
}

impl LauncherHandle {
    /// Runs `action` and waits for its answer.
    pub async fn call(&self, action: Action) -> Result<Reply, LauncherError> {
        let (tx, rx) = oneshot::channel();
        self.requests
            .send((action, tx))
            .await
            .map_err(|_| LauncherError::Stopped)?;
        rx.await.map_err(|_| LauncherError::Stopped)?
    }
}

/// What the launcher needs besides the VMI.
#[derive(Debug, Clone)]
pub struct LauncherSettings {
    pub node: NodeSettings,
    /// Bytes of serial output kept on disk (twice this at most).
    pub console_log_limit: u64,
    /// Copy the serial console to this process's stdout and stdin to the console, from
    /// before the guest starts (`ferrovirt vmi run`).
    pub console_on_stdio: bool,
}

/// Starts the launcher task. It ends, with the domain's [`Outcome`], when QEMU exits, or
/// when every handle is dropped before a domain started.
pub fn spawn(settings: LauncherSettings) -> (LauncherHandle, tokio::task::JoinHandle<Outcome>) {
    let (requests, rx) = mpsc::channel(16);
    let task = tokio::spawn(run(settings, rx));
    (LauncherHandle { requests }, task)
}

/// A running domain.
struct Running {
    vmi_key: String,
    domain: Domain,
    qemu: QemuProcess,
    qmp: Arc<Qmp>,
    console: Option<Console>,
    agent: Arc<Mutex<AgentState>>,
    agent_session: AgentSession,
    agent_poller: tokio::task::JoinHandle<()>,
    state: LifeCycle,
    reason: String,
    grace: Duration,
    shutdown: Option<ShutdownProgress>,
    /// Set when the launcher killed QEMU.
    killed: Option<Option<Duration>>,
    guest_powered_off: bool,
    panicked: bool,
    /// `(protocol, port)` pairs forwarded from the pod's address to the guest.
    forwarded: BTreeSet<(&'static str, u16)>,
    /// A reboot through the power button is under way: the guest's power-off pauses QEMU
    /// (QMP `set-action`) and is turned into a reset.
    acpi_reboot: AcpiReboot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AcpiReboot {
    None,
    /// The power button was pressed; the guest has not powered off yet.
    Pressed,
    /// The guest powered off: reset the machine and let it run.
    ResetDue,
}

struct ShutdownProgress {
    grace: Duration,
    deadline: Instant,
    next_press: Instant,
}

/// The one session with the guest agent, shared by the poller and SoftReboot.
type AgentSession = Arc<Mutex<Option<GuestAgent>>>;

#[derive(Default)]
struct AgentState {
    connected: bool,
    info: Option<GuestInfo>,
    credentials: Option<agent_credentials::SyncResult>,
}

async fn run(settings: LauncherSettings, mut requests: mpsc::Receiver<Request>) -> Outcome {
    let mut running: Option<Running> = None;
    let mut events: Option<mpsc::UnboundedReceiver<Event>> = None;
    loop {
        let wakeup = running
            .as_ref()
            .and_then(|r| r.shutdown.as_ref())
            .map(|s| s.next_press.min(s.deadline));
        tokio::select! {
            request = requests.recv() => {
                let Some((action, reply)) = request else {
                    return match running.take() {
                        None => Outcome::NeverStarted,
                        Some(mut r) => {
                            // Nobody can ask anything any more: the domain must not outlive us.
                            r.kill(None);
                            finish(r).await
                        }
                    };
                };
                let answer = handle(action, &settings, &mut running, &mut events).await;
                let _ = reply.send(answer);
            }
            Some(event) = next_event(&mut events) => {
                if let Some(r) = running.as_mut() {
                    r.on_event(event);
                    if r.acpi_reboot == AcpiReboot::ResetDue {
                        r.finish_acpi_reboot().await;
                    }
                }
            }
            _ = exited(&mut running) => {
                if let Some(mut r) = running.take() {
                    // QEMU's last events (SHUTDOWN) may still be in the channel: they decide
                    // how the domain ended.
                    if let Some(rx) = events.as_mut() {
                        drain_events(rx, &mut r).await;
                    }
                    return finish(r).await;
                }
            }
            () = sleep_until(wakeup) => {
                if let Some(r) = running.as_mut() {
                    r.shutdown_tick().await;
                }
            }
        }
    }
}

/// Applies the events still to come from a QEMU that has exited, until the QMP connection
/// closes (or a short while has passed).
async fn drain_events(events: &mut mpsc::UnboundedReceiver<Event>, r: &mut Running) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
        r.on_event(event);
    }
}

async fn next_event(events: &mut Option<mpsc::UnboundedReceiver<Event>>) -> Option<Event> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn exited(running: &mut Option<Running>) {
    match running {
        Some(r) => r.qemu.exited().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

async fn handle(
    action: Action,
    settings: &LauncherSettings,
    running: &mut Option<Running>,
    events: &mut Option<mpsc::UnboundedReceiver<Event>>,
) -> Result<Reply, LauncherError> {
    if let Action::Sync(vmi) = action {
        let key = vmi_key(&vmi);
        if let Some(r) = running {
            return if r.vmi_key == key {
                Ok(Reply::Done)
            } else {
                Err(LauncherError::OtherVmi(r.vmi_key.clone()))
            };
        }
        let (started, rx) = start(&vmi, settings).await?;
        *running = Some(started);
        *events = Some(rx);
        return Ok(Reply::Done);
    }
    let Some(r) = running.as_mut() else {
        return match action {
            Action::Ping => Ok(Reply::Done),
            Action::GetGuestInfo => Ok(Reply::GuestInfo(None)),
            _ => Err(LauncherError::NoDomain),
        };
    };
    match action {
        Action::Sync(_) => unreachable!("handled above"),
        Action::Ping => Ok(Reply::Done),
        Action::GetDomain => Ok(Reply::Domain(Box::new(r.status().await))),
        Action::GetGuestInfo => Ok(Reply::GuestInfo(
            r.agent.lock().await.info.clone().map(Box::new),
        )),
        Action::Pause => {
            r.qmp.stop().await?;
            r.state = LifeCycle::Paused;
            r.reason = "User".into();
            Ok(Reply::Done)
        }
        Action::Unpause => {
            r.qmp.cont().await?;
            r.state = LifeCycle::Running;
            r.reason = "Unpaused".into();
            Ok(Reply::Done)
        }
        Action::Reset => {
            r.qmp.system_reset().await?;
            Ok(Reply::Done)
        }
        Action::SoftReboot => {
            // QEMU serves the agent's channel to one client: use the poller's session.
            let mut session = r.agent_session.lock().await;
            match session.as_mut() {
                Some(agent) => agent
                    .shutdown("reboot")
                    .await
                    .map_err(|e| LauncherError::GuestAgent(e.to_string()))?,
                None => {
                    drop(session);
                    r.begin_acpi_reboot().await?;
                }
            }
            Ok(Reply::Done)
        }
        Action::Shutdown(grace) => {
            r.begin_shutdown(grace.unwrap_or(r.grace)).await;
            Ok(Reply::Done)
        }
        Action::Kill => {
            r.kill(None);
            Ok(Reply::Done)
        }
        Action::ForwardPort { protocol, port } => {
            r.forward_port(protocol, port).await?;
            Ok(Reply::Done)
        }
    }
}

fn vmi_key(vmi: &VirtualMachineInstance) -> String {
    format!(
        "{}/{}",
        vmi.metadata.namespace.as_deref().unwrap_or("default"),
        vmi.metadata.name.as_deref().unwrap_or("")
    )
}

/// Builds, prepares and starts the domain of `vmi`; returns once its vCPUs run (or, with
/// `startStrategy: Paused`, once it is ready to).
async fn start(
    vmi: &VirtualMachineInstance,
    settings: &LauncherSettings,
) -> Result<(Running, mpsc::UnboundedReceiver<Event>), LauncherError> {
    let began = Instant::now();
    let facts = node_facts::gather(vmi, &settings.node).await?;
    let started = async {
        let domain = domain::build(vmi, &facts)?;
        let credentials = agent_credentials::sources(vmi, &facts.access_credentials);
        for warning in &domain.warnings {
            tracing::warn!("{warning}");
        }
        prepare::prepare(&domain.prepare).await?;
        let prepared = began.elapsed();
        match start_domain(vmi, settings, domain, credentials, began, prepared).await {
            Ok(started) => Ok(started),
            Err((domain, e)) => {
                for tap in &domain.taps {
                    prepare::remove_tap(tap).await;
                }
                Err(e)
            }
        }
    }
    .await;
    if started.is_err() {
        // No domain will use its sockets.
        crate::unix_path::remove_socket_dir(&facts.socket_dir);
    }
    started
}

/// Creates the taps and starts QEMU; on failure, hands the domain back so its taps can be
/// removed.
async fn start_domain(
    vmi: &VirtualMachineInstance,
    settings: &LauncherSettings,
    domain: Domain,
    credentials: Vec<agent_credentials::Source>,
    began: Instant,
    prepared: Duration,
) -> Result<(Running, mpsc::UnboundedReceiver<Event>), (Domain, LauncherError)> {
    for tap in &domain.taps {
        if let Err(e) = prepare::create_tap(tap).await {
            return Err((domain, e.into()));
        }
    }
    let (qemu, qmp, events) = match QemuProcess::start(&domain).await {
        Ok(started) => started,
        Err(e) => return Err((domain, e)),
    };
    let qmp = Arc::new(qmp);
    let console = match &domain.sockets.serial {
        None => None,
        Some(socket) => {
            let public = socket.with_file_name("virt-serial0");
            let log = settings.node.run_dir.join("virt-serial0-log");
            match Console::attach(socket, &public, log, settings.console_log_limit).await {
                Ok(console) => {
                    if settings.console_on_stdio {
                        console.attach_stdio();
                    }
                    Some(console)
                }
                Err(e) => {
                    qemu.kill();
                    return Err((
                        domain,
                        LauncherError::QemuStart(format!("attaching the serial console: {e}")),
                    ));
                }
            }
        }
    };
    let (state, reason) = if domain.start_paused {
        (LifeCycle::Paused, "StartingUp")
    } else {
        if let Err(e) = qmp.cont().await {
            qemu.kill();
            return Err((domain, e.into()));
        }
        (LifeCycle::Running, "Booted")
    };
    tracing::info!(
        prepare_ms = prepared.as_millis() as u64,
        total_ms = began.elapsed().as_millis() as u64,
        software_emulation = domain.software_emulation,
        "domain {}",
        if domain.start_paused {
            "started paused"
        } else {
            "running"
        }
    );
    let agent = Arc::new(Mutex::new(AgentState::default()));
    let agent_session = AgentSession::default();
    let agent_poller = tokio::spawn(poll_guest_agent(
        domain.sockets.guest_agent.clone(),
        agent.clone(),
        agent_session.clone(),
        credentials,
    ));
    let grace = vmi
        .spec
        .termination_grace_period_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_GRACE);
    let forwarded = domain
        .forward_route
        .as_ref()
        .map(|route| route.listed.clone())
        .unwrap_or_default();
    Ok((
        Running {
            vmi_key: vmi_key(vmi),
            domain,
            qemu,
            qmp,
            console,
            agent,
            agent_session,
            agent_poller,
            state,
            reason: reason.into(),
            grace,
            shutdown: None,
            killed: None,
            guest_powered_off: false,
            panicked: false,
            forwarded,
            acpi_reboot: AcpiReboot::None,
        },
        events,
    ))
}

impl Running {
    /// Forwards `protocol` `port` of the pod's address to the guest, once: QEMU's user-mode
    /// network reaches the guest only through forwarding rules, so a port `ports[]` did not
    /// list gets its rule when it is first asked for.
    async fn forward_port(
        &mut self,
        protocol: &'static str,
        port: u16,
    ) -> Result<(), LauncherError> {
        let route = self
            .domain
            .forward_route
            .as_ref()
            .ok_or(LauncherError::NoForwardRoute)?;
        if self.forwarded.contains(&(protocol, port)) {
            return Ok(());
        }
        let rule = route.rule(protocol, port);
        // hostfwd_add is a human monitor command only: its answer is text, empty on success.
        let command = format!("hostfwd_add {} {rule}", route.netdev);
        let said: String = self
            .qmp
            .execute(
                "human-monitor-command",
                Some(serde_json::json!({"command-line": command})),
            )
            .await?;
        if !said.trim().is_empty() {
            return Err(LauncherError::PortForward {
                rule,
                message: said.trim().to_owned(),
            });
        }
        tracing::info!(%rule, "port forwarded to the guest");
        self.forwarded.insert((protocol, port));
        Ok(())
    }

    fn on_event(&mut self, event: Event) {
        tracing::debug!(?event, "QMP event");
        match event {
            // The power-off of a reboot through the power button: QEMU paused, not ended.
            Event::Shutdown { guest: true, .. } if self.acpi_reboot == AcpiReboot::Pressed => {
                self.acpi_reboot = AcpiReboot::ResetDue;
            }
            Event::Stop if self.acpi_reboot == AcpiReboot::ResetDue => {}
            Event::Shutdown { guest, .. } => {
                self.guest_powered_off |= guest;
                self.state = LifeCycle::Shutoff;
                self.reason = "Shutdown".into();
            }
            Event::Stop
                if !matches!(
                    self.state,
                    LifeCycle::Paused | LifeCycle::Shutoff | LifeCycle::Crashed
                ) =>
            {
                self.state = LifeCycle::Paused;
                if self.reason != "IOError" {
                    self.reason = "User".into();
                }
            }
            Event::Resume => {
                self.state = if self.shutdown.is_some() {
                    LifeCycle::ShuttingDown
                } else {
                    LifeCycle::Running
                };
                self.reason = "Unpaused".into();
            }
            Event::BlockIoError { action, .. } if action == "stop" => {
                self.state = LifeCycle::Paused;
                self.reason = "IOError".into();
            }
            Event::GuestPanicked { .. } => {
                self.panicked = true;
                self.state = LifeCycle::Crashed;
                self.reason = "Panicked".into();
            }
            _ => {}
        }
    }

    /// Presses the power button with QEMU set to pause, not end, when the guest powers off.
    async fn begin_acpi_reboot(&mut self) -> Result<(), LauncherError> {
        if self.shutdown.is_some() {
            return Err(LauncherError::ShuttingDown);
        }
        self.set_shutdown_action("pause").await?;
        self.acpi_reboot = AcpiReboot::Pressed;
        tracing::info!("rebooting the guest through the power button");
        self.qmp.system_powerdown().await?;
        Ok(())
    }

    /// Resets the machine the guest powered off, runs it again and lets a power-off end
    /// QEMU again.
    async fn finish_acpi_reboot(&mut self) {
        self.acpi_reboot = AcpiReboot::None;
        let steps = async {
            self.qmp.system_reset().await?;
            self.qmp.cont().await?;
            self.set_shutdown_action("poweroff").await
        };
        match steps.await {
            Ok(()) => tracing::info!("the guest powered off and was started again"),
            Err(e) => {
                tracing::warn!(error = %e, "cannot restart the guest after its power-off; ending it");
                self.kill(None);
            }
        }
    }

    /// What QEMU does when the guest powers off: `poweroff` (end) or `pause`.
    async fn set_shutdown_action(&self, action: &str) -> Result<(), QmpError> {
        self.qmp
            .execute::<serde_json::Value>(
                "set-action",
                Some(serde_json::json!({"shutdown": action})),
            )
            .await
            .map(|_| ())
    }

    async fn begin_shutdown(&mut self, grace: Duration) {
        let now = Instant::now();
        if self.acpi_reboot != AcpiReboot::None {
            // A stop wins over a reboot under way: the next power-off ends QEMU.
            self.acpi_reboot = AcpiReboot::None;
            if let Err(e) = self.set_shutdown_action("poweroff").await {
                tracing::warn!(error = %e, "cannot undo the reboot's shutdown action");
            }
        }
        if let Some(progress) = &mut self.shutdown {
            // Asked again with a shorter grace period (a forced stop): the earlier end wins.
            if now + grace < progress.deadline {
                tracing::info!(grace_s = grace.as_secs(), "grace period shortened");
                progress.grace = grace;
                progress.deadline = now + grace;
            }
            return;
        }
        tracing::info!(grace_s = grace.as_secs(), "shutting the guest down");
        self.shutdown = Some(ShutdownProgress {
            grace,
            deadline: now + grace,
            next_press: now,
        });
        self.state = LifeCycle::ShuttingDown;
        self.shutdown_tick().await;
    }

    /// Presses the power button when it is due, or kills QEMU at the end of the grace
    /// period.
    async fn shutdown_tick(&mut self) {
        let Some(progress) = &mut self.shutdown else {
            return;
        };
        let now = Instant::now();
        if now >= progress.deadline {
            let grace = progress.grace;
            self.shutdown = None;
            tracing::warn!(grace_s = grace.as_secs(), "grace period over; killing QEMU");
            self.kill(Some(grace));
            return;
        }
        if now >= progress.next_press {
            progress.next_press = now + POWER_BUTTON_REPEAT;
            if let Err(e) = self.qmp.system_powerdown().await {
                tracing::warn!(error = %e, "pressing the power button");
            }
        }
    }

    fn kill(&mut self, after_grace: Option<Duration>) {
        if self.killed.is_none() {
            self.killed = Some(after_grace);
        }
        self.qemu.kill();
    }

    async fn status(&self) -> DomainStatus {
        // One guard for both fields: a second lock in the same expression would wait on the
        // first guard, which lives until the end of the statement.
        let agent = self.agent.lock().await;
        DomainStatus {
            name: self.domain_name(),
            uuid: self.uuid(),
            state: self.state,
            reason: self.reason.clone(),
            software_emulation: self.domain.software_emulation,
            guest_agent_connected: agent.connected,
            access_credentials: agent.credentials.clone(),
            qemu_pid: self.qemu.pid(),
            console_socket: self
                .console
                .as_ref()
                .map(|_| self.run_dir().join("virt-serial0")),
            vnc_socket: self.domain.sockets.vnc.clone(),
            warnings: self.domain.warnings.clone(),
        }
    }

    fn run_dir(&self) -> PathBuf {
        self.domain
            .sockets
            .qmp
            .parent()
            .map(PathBuf::from)
            .unwrap_or_default()
    }

    fn domain_name(&self) -> String {
        self.vmi_key.replace('/', "_")
    }

    fn uuid(&self) -> String {
        self.domain.uuid.clone()
    }
}

/// Reaps QEMU and decides how the domain ended.
async fn finish(mut r: Running) -> Outcome {
    r.qemu.exited().await;
    r.agent_poller.abort();
    for tap in &r.domain.taps {
        prepare::remove_tap(tap).await;
    }
    if let Some(dir) = r.domain.sockets.qmp.parent() {
        crate::unix_path::remove_socket_dir(dir);
    }
    let outcome = if let Some(after_grace) = r.killed {
        if r.guest_powered_off {
            Outcome::ShutDown
        } else {
            Outcome::Destroyed { after_grace }
        }
    } else if r.panicked {
        Outcome::Panicked
    } else if r.guest_powered_off || r.qemu.exited_cleanly() {
        // QEMU exits with 0 only when the guest powered off (the launcher never asks it
        // to quit).
        Outcome::ShutDown
    } else {
        Outcome::Crashed {
            message: r.qemu.failure_message(),
        }
    };
    tracing::info!(outcome = %outcome.termination_message(), "domain ended");
    outcome
}

/// Keeps `state` current with what the guest agent says.
async fn poll_guest_agent(
    socket: PathBuf,
    state: Arc<Mutex<AgentState>>,
    session: AgentSession,
    credentials: Vec<agent_credentials::Source>,
) {
    // What the agent last put into the guest: propagated again only when the Secrets'
    // files change or the last attempt failed.
    let mut applied: Option<agent_credentials::Desired> = None;
    loop {
        let (info, synced) = {
            let mut session = session.lock().await;
            if session.is_none() {
                *session = GuestAgent::connect(&socket, Duration::from_secs(2))
                    .await
                    .ok();
            }
            let info = match session.as_mut() {
                Some(agent) => agent.guest_info().await.ok(),
                None => None,
            };
            if info.is_none() {
                // A failed exchange leaves the channel out of step: start over.
                *session = None;
            }
            let synced = match session.as_mut() {
                _ if credentials.is_empty() => None,
                Some(agent) => sync_credentials(agent, &credentials, &mut applied).await,
                None => Some(agent_credentials::SyncResult::failed(
                    agent_credentials::AGENT_OFFLINE,
                )),
            };
            (info, synced)
        };
        {
            let mut s = state.lock().await;
            s.connected = info.is_some();
            if info.is_some() {
                s.info = info;
            }
            if synced.is_some() {
                s.credentials = synced;
            }
        }
        tokio::time::sleep(AGENT_POLL).await;
    }
}

/// Propagates the credentials when they differ from what was `applied`; the new result, or
/// `None` when nothing was done.
async fn sync_credentials(
    agent: &mut GuestAgent,
    credentials: &[agent_credentials::Source],
    applied: &mut Option<agent_credentials::Desired>,
) -> Option<agent_credentials::SyncResult> {
    let sources = credentials.to_vec();
    let desired = tokio::task::spawn_blocking(move || agent_credentials::read(&sources))
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
    let desired = match desired {
        Ok(desired) => desired,
        Err(message) => {
            *applied = None;
            return Some(agent_credentials::SyncResult::failed(message));
        }
    };
    if applied.as_ref() == Some(&desired) {
        return None;
    }
    let result = agent_credentials::apply(agent, &desired).await;
    if result.succeeded {
        tracing::info!(
            users = desired.keys.len() + desired.passwords.len(),
            "access credentials propagated by the guest agent"
        );
        *applied = Some(desired);
    } else {
        tracing::warn!(message = %result.message, "access credentials not propagated");
        *applied = None;
    }
    Some(result)
}
