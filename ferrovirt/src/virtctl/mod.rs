//! virtctl's verbs as `ferrovirt` subcommands: start, stop, restart, pause, unpause,
//! softreboot, console, vnc, port-forward, ssh, guestosinfo, userlist, fslist and create vm,
//! instancetype and preference. Each is a call of the
//! `subresources.kubevirt.io` API through the cluster's API server with the kubeconfig's
//! credentials, as virtctl makes it, and prints virtctl's messages.

mod create_instancetype;
mod create_vm;
mod port_forward;
mod stream;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use http_body_util::BodyExt;
use kube::Client;
use serde_json::{Value, json};

const SUBRESOURCES: &str = "/apis/subresources.kubevirt.io/v1";

/// What `create` prints.
#[derive(Subcommand, Debug)]
pub enum Create {
    /// A VirtualMachine manifest to pipe into `kubectl apply -f -` (virtctl create vm).
    Vm(Box<CreateVmArgs>),
    /// A VirtualMachine(Cluster)Instancetype manifest (virtctl create instancetype).
    Instancetype(CreateInstancetypeArgs),
    /// A VirtualMachine(Cluster)Preference manifest (virtctl create preference).
    Preference(CreatePreferenceArgs),
}

/// Where a verb goes: the namespace and the object.
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// The VM's (or VMI's) name.
    pub name: String,
    /// The namespace [default: the kubeconfig context's].
    #[arg(short, long)]
    pub namespace: Option<String>,
}

#[derive(Args, Debug)]
pub struct StartArgs {
    #[command(flatten)]
    target: Target,
    /// Start the VM's instance paused (it waits for `unpause`).
    #[arg(long)]
    paused: bool,
    /// Check the request without carrying it out.
    #[arg(long)]
    dry_run: bool,
}

/// `stop` and `restart`.
#[derive(Args, Debug)]
pub struct StopArgs {
    #[command(flatten)]
    target: Target,
    /// Seconds the guest gets to shut down, overriding the VMI's grace period (needs
    /// --force; 0 kills it at once).
    #[arg(long)]
    grace_period: Option<i64>,
    /// Allow a grace period shorter than the VMI's.
    #[arg(long)]
    force: bool,
    /// Check the request without carrying it out.
    #[arg(long)]
    dry_run: bool,
}

/// The object `pause` and `unpause` act on.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PauseKind {
    Vm,
    Vmi,
}

#[derive(Args, Debug)]
pub struct PauseArgs {
    /// `vm` or `vmi` (a VM's instance has the VM's name).
    kind: PauseKind,
    #[command(flatten)]
    target: Target,
    #[arg(long)]
    dry_run: bool,
}

/// A client of the API server and the namespace the verb is in.
struct Session {
    client: Client,
    namespace: String,
    name: String,
}

impl Session {
    async fn open(target: &Target) -> Result<Self> {
        let (client, namespace) = crate::cluster::client_in(target.namespace.as_deref()).await?;
        Ok(Self {
            client,
            namespace,
            name: target.name.clone(),
        })
    }

    /// The path of a subresource of the object.
    fn path(&self, resource: &str, verb: &str) -> String {
        format!(
            "{SUBRESOURCES}/namespaces/{}/{resource}/{}/{verb}",
            self.namespace, self.name
        )
    }

    /// Sends a request; the body of a 2xx answer, else the Status message as the error.
    async fn call(&self, method: http::Method, path: &str, body: Option<Value>) -> Result<Vec<u8>> {
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(kube::client::Body::from(bytes))
            .context("building the request")?;
        let response = self
            .client
            .send(request)
            .await
            .with_context(|| format!("calling {path}"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .context("reading the answer")?
            .to_bytes()
            .to_vec();
        if !status.is_success() {
            return Err(Refused::new(status, &body).into());
        }
        Ok(body)
    }
}

/// A call the server refused: its status and what its Status said (else the body).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
struct Refused {
    status: http::StatusCode,
    message: String,
}

impl Refused {
    fn new(status: http::StatusCode, body: &[u8]) -> Self {
        let message = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|s| s["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("{status}: {}", String::from_utf8_lossy(body)));
        Self { status, message }
    }
}

fn dry_run(on: bool) -> Value {
    if on { json!(["All"]) } else { json!([]) }
}

/// What a verb acts on.
#[derive(Clone, Copy)]
enum Kind {
    Vm,
    Vmi,
}

impl Kind {
    fn resource(self) -> &'static str {
        match self {
            Self::Vm => "virtualmachines",
            Self::Vmi => "virtualmachineinstances",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Self::Vm => "VM",
            Self::Vmi => "VMI",
        }
    }
}

/// PUTs the object's `verb` subresource and prints virtctl's message.
async fn put(session: &Session, kind: Kind, verb: &str, body: Value, dry: bool) -> Result<()> {
    session
        .call(
            http::Method::PUT,
            &session.path(kind.resource(), verb),
            Some(body),
        )
        .await?;
    let note = if dry { " (dry run)" } else { "" };
    println!(
        "{} {} was scheduled to {verb}{note}",
        kind.short(),
        session.name
    );
    Ok(())
}

pub async fn start(args: StartArgs) -> Result<()> {
    let session = Session::open(&args.target).await?;
    let body = json!({"paused": args.paused, "dryRun": dry_run(args.dry_run)});
    put(&session, Kind::Vm, "start", body, args.dry_run).await
}

/// `stop` or `restart` (`verb`): KubeVirt names the grace period differently in each.
pub async fn stop(args: StopArgs, verb: &str) -> Result<()> {
    if args.grace_period.is_some() && !args.force {
        bail!("Can not set gracePeriod without --force=true");
    }
    let session = Session::open(&args.target).await?;
    let mut body = json!({"dryRun": dry_run(args.dry_run)});
    if let Some(grace) = args.grace_period {
        let key = if verb == "restart" {
            "gracePeriodSeconds"
        } else {
            "gracePeriod"
        };
        body[key] = json!(grace);
    }
    put(&session, Kind::Vm, verb, body, args.dry_run).await
}

/// `pause` (`pausing` true) or `unpause`: both act on the instance; `pause vm` checks the
/// VM first and says why it has no instance, as virtctl does.
pub async fn pause(args: PauseArgs, pausing: bool) -> Result<()> {
    let session = Session::open(&args.target).await?;
    let verb = if pausing { "pause" } else { "unpause" };
    let body = json!({"dryRun": dry_run(args.dry_run)});
    let PauseKind::Vm = args.kind else {
        return put(&session, Kind::Vmi, verb, body, args.dry_run).await;
    };
    let vm: api::kubevirt::VirtualMachine = serde_json::from_slice(
        &session
            .call(
                http::Method::GET,
                &format!(
                    "/apis/kubevirt.io/v1/namespaces/{}/virtualmachines/{}",
                    session.namespace, session.name
                ),
                None,
            )
            .await
            .with_context(|| format!("Error getting VirtualMachine {}", session.name))?,
    )
    .context("the VirtualMachine is not readable")?;
    let pausing_word = if pausing { "pausing" } else { "unpausing" };
    let result = put(&session, Kind::Vmi, verb, body, args.dry_run).await;
    let vmi_missing = result
        .as_ref()
        .err()
        .and_then(|e| e.downcast_ref::<Refused>())
        .is_some_and(|r| r.status == http::StatusCode::NOT_FOUND);
    if !vmi_missing {
        return result;
    }
    if vm.spec.effective_run_strategy() == api::kubevirt::RunStrategy::Halted {
        bail!(
            "Error {pausing_word} VirtualMachineInstance {0}. VirtualMachine {0} is not set to run",
            session.name
        )
    }
    bail!(
        "Error {pausing_word} VirtualMachineInstance {}, it was not found",
        session.name
    )
}

pub async fn soft_reboot(target: Target) -> Result<()> {
    let session = Session::open(&target).await?;
    put(&session, Kind::Vmi, "softreboot", json!({}), false).await
}

/// What the guest agent reports: `guestosinfo`, `userlist` or `filesystemlist`, printed
/// as indented JSON.
pub async fn guest_info(target: Target, verb: &str) -> Result<()> {
    let session = Session::open(&target).await?;
    let body = session
        .call(
            http::Method::GET,
            &session.path("virtualmachineinstances", verb),
            None,
        )
        .await?;
    let value: Value = serde_json::from_slice(&body).context("the answer is not JSON")?;
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(())
}

pub use create_instancetype::{
    CreateInstancetypeArgs, CreatePreferenceArgs, create_instancetype, create_preference,
};
pub use create_vm::{CreateVmArgs, create_vm, manifest_from_flags};
pub use port_forward::{PortForwardArgs, SshArgs, port_forward, ssh};
pub use stream::{ConsoleArgs, VncArgs, console, vnc};
