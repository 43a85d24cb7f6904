//! `port-forward` and `ssh`: TCP to a port of a VM's guest through the API server, as a
//! WebSocket to the `portforward/{port}/tcp` subresource (raw bytes in binary frames), as
//! virtctl makes it. `ssh` runs the system's ssh with `port-forward --stdio` as its
//! ProxyCommand, as virtctl's default (wrapped) ssh does.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{ArgAction, Args};
use tokio::net::TcpListener;

use super::stream::{bridge, open_path};
use super::{Session, Target};

#[derive(Args, Debug)]
pub struct PortForwardArgs {
    /// `TYPE/NAME[/NAMESPACE]`: `vm/NAME` or `vmi/NAME` (also vms, vmis, virtualmachine(s),
    /// virtualmachineinstance(s)).
    target: String,
    /// `[tcp/]LOCAL[:REMOTE]`: the local port and the guest's (the same when REMOTE is
    /// left out); LOCAL 0 picks a free port.
    #[arg(required = true)]
    ports: Vec<String>,
    /// Forward one port to stdin and stdout instead of listening.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set, default_value_t = false)]
    stdio: bool,
    /// The local address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    address: String,
    /// The namespace when TARGET names none [default: the kubeconfig context's].
    #[arg(short, long)]
    namespace: Option<String>,
}

#[derive(Args, Debug)]
pub struct SshArgs {
    /// `[USER@]TYPE/NAME[/NAMESPACE]`, as for port-forward.
    target: String,
    /// The user to log in as [default: USER@ of the target, else the local user].
    #[arg(short = 'l', long)]
    username: Option<String>,
    /// The private key to authenticate with.
    #[arg(short = 'i', long)]
    identity_file: Option<String>,
    /// The guest's SSH port.
    #[arg(short, long, default_value_t = 22)]
    port: u16,
    /// A command to run instead of a login shell.
    #[arg(short, long)]
    command: Option<String>,
    /// More options for the local ssh, each passed as one argument (for example
    /// `-t="-o StrictHostKeyChecking=no"`).
    #[arg(short = 't', long = "local-ssh-opts", allow_hyphen_values = true)]
    local_ssh_opts: Vec<String>,
    /// The namespace when TARGET names none [default: the kubeconfig context's].
    #[arg(short, long)]
    namespace: Option<String>,
}

/// The object a port-forward goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ForwardTarget {
    /// `vm` or `vmi`, as virtctl writes it back.
    kind: &'static str,
    name: String,
    namespace: Option<String>,
}

impl ForwardTarget {
    /// Reads `TYPE/NAME[/NAMESPACE]`.
    fn parse(target: &str) -> Result<Self> {
        let parts: Vec<&str> = target.split('/').collect();
        let (kind, name, namespace) = match parts.as_slice() {
            [kind, name] => (*kind, *name, None),
            [_, _, ""] => {
                bail!("namespace cannot be empty in {target:?}")
            }
            [kind, name, namespace] => (*kind, *name, Some((*namespace).to_owned())),
            [_] => bail!("target {target:?} must contain type and name separated by '/'"),
            _ => bail!("target {target:?} is not valid with more than two '/'"),
        };
        let kind = match kind.to_ascii_lowercase().as_str() {
            "vm" | "vms" | "virtualmachine" | "virtualmachines" => "vm",
            "vmi" | "vmis" | "virtualmachineinstance" | "virtualmachineinstances" => "vmi",
            other => bail!("unsupported resource type {other:?}: vm or vmi"),
        };
        if name.is_empty() {
            bail!("name cannot be empty in {target:?}");
        }
        Ok(Self {
            kind,
            name: name.to_owned(),
            namespace,
        })
    }

    fn resource(&self) -> &'static str {
        match self.kind {
            "vm" => "virtualmachines",
            _ => "virtualmachineinstances",
        }
    }
}

/// One forwarded port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ForwardedPort {
    local: u16,
    remote: u16,
}

impl ForwardedPort {
    /// Reads `[tcp/]LOCAL[:REMOTE]`.
    fn parse(arg: &str) -> Result<Self> {
        let ports = match arg.split_once('/') {
            Some(("tcp", ports)) => ports,
            Some(("udp", _)) => bail!("{arg:?}: udp is not supported yet, only tcp"),
            Some((other, _)) => bail!("{arg:?}: unknown protocol {other:?}"),
            None => arg,
        };
        let number = |s: &str| {
            s.parse::<u16>()
                .with_context(|| format!("{arg:?}: {s:?} is not a port number"))
        };
        let (local, remote) = match ports.split_once(':') {
            Some((local, remote)) => (number(local)?, number(remote)?),
            None => (number(ports)?, number(ports)?),
        };
        if remote == 0 {
            bail!("{arg:?}: the guest's port cannot be 0");
        }
        Ok(Self { local, remote })
    }
}

async fn session(target: &ForwardTarget, namespace: Option<String>) -> Result<Session> {
    Session::open(&Target {
        name: target.name.clone(),
        namespace: target.namespace.clone().or(namespace),
    })
    .await
}

fn forward_path(session: &Session, target: &ForwardTarget, remote: u16) -> String {
    session.path(target.resource(), &format!("portforward/{remote}/tcp"))
}

pub async fn port_forward(args: PortForwardArgs) -> Result<()> {
    let target = ForwardTarget::parse(&args.target)?;
    let ports = args
        .ports
        .iter()
        .map(|p| ForwardedPort::parse(p))
        .collect::<Result<Vec<_>>>()?;
    let session = session(&target, args.namespace).await?;
    if args.stdio {
        let [port] = ports.as_slice() else {
            bail!("only one port supported when forwarding to stdout");
        };
        let socket = open_path(&session, &forward_path(&session, &target, port.remote)).await?;
        bridge(socket, tokio::io::stdin(), tokio::io::stdout(), false).await;
        return Ok(());
    }
    let session = std::sync::Arc::new(session);
    for port in ports {
        let listener = TcpListener::bind((args.address.as_str(), port.local))
            .await
            .with_context(|| format!("listening on {}:{}", args.address, port.local))?;
        let local = listener.local_addr()?;
        eprintln!("forwarding tcp {local} to {}", port.remote);
        let path = forward_path(&session, &target, port.remote);
        tokio::spawn(accept(listener, session.clone(), path));
    }
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl+C")?;
    Ok(())
}

/// Opens a tunnel for each connection to `listener`.
async fn accept(listener: TcpListener, session: std::sync::Arc<Session>, path: String) {
    loop {
        let Ok((tcp, peer)) = listener.accept().await else {
            return;
        };
        let session = session.clone();
        let path = path.clone();
        tokio::spawn(async move {
            match open_path(&session, &path).await {
                Ok(socket) => {
                    let (read, write) = tcp.into_split();
                    bridge(socket, read, write, false).await;
                }
                Err(e) => eprintln!("error: a tunnel for {peer}: {e:#}"),
            }
        });
    }
}

/// Runs the system's ssh through `port-forward --stdio`; its exit status is ssh's.
pub fn ssh(args: SshArgs) -> Result<ExitCode> {
    let (user, target) = match args.target.split_once('@') {
        Some((user, target)) => (Some(user.to_owned()), target),
        None => (None, args.target.as_str()),
    };
    let target = ForwardTarget::parse(target)?;
    let namespace = target
        .namespace
        .clone()
        .or(args.namespace.clone())
        .map(Ok)
        .unwrap_or_else(default_namespace)?;
    let user = user
        .or(args.username.clone())
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()));
    let me = std::env::current_exe().context("finding this program for ssh's ProxyCommand")?;
    let argv = ssh_argv(
        &me.display().to_string(),
        &target,
        &namespace,
        user.as_deref(),
        &args,
    );
    let status = std::process::Command::new("ssh")
        .args(&argv)
        .status()
        .context("running ssh (is openssh-client installed?)")?;
    Ok(ExitCode::from(
        status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .unwrap_or(255),
    ))
}

/// The kubeconfig context's namespace, read without a client.
fn default_namespace() -> Result<String> {
    let config = kube::config::Kubeconfig::read().context("reading the kubeconfig")?;
    let context = config.current_context.clone().unwrap_or_default();
    Ok(config
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.namespace.clone())
        .unwrap_or_else(|| "default".to_owned()))
}

/// ssh's arguments: the ProxyCommand, the extra options and the key, then
/// `[USER@]KIND.NAME.NAMESPACE` as the host (what known_hosts records) and the command.
fn ssh_argv(
    me: &str,
    target: &ForwardTarget,
    namespace: &str,
    user: Option<&str>,
    args: &SshArgs,
) -> Vec<String> {
    let mut argv = vec![
        "-o".to_owned(),
        format!(
            "ProxyCommand={me} port-forward --stdio=true {}/{}/{namespace} {}",
            target.kind, target.name, args.port
        ),
    ];
    argv.extend(args.local_ssh_opts.iter().cloned());
    if let Some(identity) = &args.identity_file {
        argv.extend(["-i".to_owned(), identity.clone()]);
    }
    let host = format!("{}.{}.{namespace}", target.kind, target.name);
    argv.push(match user {
        Some(user) => format!("{user}@{host}"),
        None => host,
    });
    argv.extend(args.command.iter().cloned());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_read_as_virtctl_reads_them() {
        let t = ForwardTarget::parse("vmi/web").unwrap();
        assert_eq!((t.kind, t.name.as_str(), t.namespace), ("vmi", "web", None));
        let t = ForwardTarget::parse("VirtualMachines/web/prod").unwrap();
        assert_eq!(t.kind, "vm");
        assert_eq!(t.namespace.as_deref(), Some("prod"));
        assert_eq!(t.resource(), "virtualmachines");
        for (bad, says) in [
            ("web", "must contain type and name"),
            ("pod/web", "unsupported resource type"),
            ("vm/", "name cannot be empty"),
            ("vm/web/", "namespace cannot be empty"),
            ("vm/a/b/c", "more than two"),
        ] {
            let err = ForwardTarget::parse(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn ports_are_local_then_remote() {
        assert_eq!(
            ForwardedPort::parse("8080").unwrap(),
            ForwardedPort {
                local: 8080,
                remote: 8080
            }
        );
        assert_eq!(
            ForwardedPort::parse("tcp/0:22").unwrap(),
            ForwardedPort {
                local: 0,
                remote: 22
            }
        );
        for (bad, says) in [
            ("udp/53", "udp is not supported"),
            ("sctp/1", "unknown protocol"),
            ("x:22", "not a port number"),
            ("70000", "not a port number"),
            ("1:0", "cannot be 0"),
        ] {
            let err = ForwardedPort::parse(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn ssh_goes_through_port_forward_as_a_proxy_command() {
        let args = SshArgs {
            target: "root@vm/web".into(),
            username: None,
            identity_file: Some("/k".into()),
            port: 2222,
            command: Some("uname -a".into()),
            local_ssh_opts: vec!["-oStrictHostKeyChecking=no".into()],
            namespace: None,
        };
        let target = ForwardTarget::parse("vm/web").unwrap();
        let argv = ssh_argv("/bin/ferrovirt", &target, "prod", Some("root"), &args);
        assert_eq!(
            argv,
            [
                "-o",
                "ProxyCommand=/bin/ferrovirt port-forward --stdio=true vm/web/prod 2222",
                "-oStrictHostKeyChecking=no",
                "-i",
                "/k",
                "root@vm.web.prod",
                "uname -a",
            ]
        );
    }
}
