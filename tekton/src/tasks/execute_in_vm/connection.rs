//! The connection Secret of execute-in-vm (`type`, `user`, `ssh-privatekey`,
//! `host-public-key`, `disable-strict-host-key-checking`, `additional-ssh-options`), read
//! from its mount, and the system's `ssh` run with it. Upstream writes the key to
//! `~/.ssh/id_rsa`; here it goes to a private temporary directory, with its own known hosts,
//! so that running a task on a workstation leaves the user's `~/.ssh` alone.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::secret_value;

/// How to reach the guest.
#[derive(Debug, PartialEq, Eq)]
pub struct Connection {
    user: String,
    private_key: String,
    host_public_key: String,
    strict_host_key_checking: bool,
    options: Vec<String>,
    port: u16,
}

impl Connection {
    /// Reads the Secret mounted at `dir`, as upstream reads it.
    pub fn read(dir: &Path) -> Result<Self, String> {
        if !dir.is_dir() {
            return Err(format!("secret does not exist at {}", dir.display()));
        }
        let value = |key: &str| secret_value(dir, key);
        let kind = value("type")?.trim().to_owned();
        let mut private_key = value("ssh-privatekey")?;
        if private_key.is_empty() {
            private_key = value("ssh-private-key")?;
        }
        if kind != "ssh" && private_key.is_empty() {
            return Err(if kind.is_empty() {
                "type secret attribute is required".into()
            } else {
                format!("{kind} is invalid type")
            });
        }
        let user = value("user")?.trim().to_owned();
        if user.is_empty() {
            return Err("user secret attribute is required".into());
        }
        if private_key.is_empty() {
            return Err("ssh-privatekey secret attribute is required".into());
        }
        if !private_key.ends_with('\n') {
            private_key.push('\n');
        }
        let host_public_key = value("host-public-key")?.trim().to_owned();
        let disable_strict = value("disable-strict-host-key-checking")?
            .trim()
            .to_lowercase()
            == "true";
        if host_public_key.is_empty() && !disable_strict {
            return Err(
                "host-public-key or disable-strict-host-key-checking=true secret attribute is required".into(),
            );
        }
        let options_text = value("additional-ssh-options")?;
        let options = shlex::split(&options_text)
            .ok_or_else(|| format!("additional-ssh-options: cannot split {options_text:?}"))?;
        let port = port_of(&options)?;
        Ok(Self {
            user,
            private_key,
            host_public_key,
            strict_host_key_checking: !disable_strict,
            options,
            port,
        })
    }

    /// Waits until an SSH server answers on the guest's SSH port, then two seconds more, as
    /// upstream does. Upstream waits for the TCP connection only; here the server's
    /// identification line must arrive too, because a port forwarded by QEMU's user-mode
    /// network (masquerade on `ferrovirt up`) takes connections before the guest listens.
    pub async fn wait_reachable(&self, ip: &str, limit: Option<Duration>) -> Result<(), String> {
        let deadline = limit.map(|l| Instant::now() + l);
        let address = format!("{ip}:{}", self.port);
        loop {
            if ssh_server_answers(&address).await {
                tokio::time::sleep(Duration::from_secs(2)).await;
                return Ok(());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err("command timed out".into());
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    }

    /// Runs `script` on the guest with the system's `ssh`, its output passed through.
    pub async fn run(&self, ip: &str, script: &str, limit: Option<Duration>) -> Result<(), String> {
        let dir = tempfile::tempdir().map_err(|e| format!("a key directory: {e}"))?;
        let key = dir.path().join("id");
        write_private(&key, &self.private_key)?;
        let known_hosts = dir.path().join("known_hosts");
        let hosts = if self.host_public_key.is_empty() {
            String::new()
        } else {
            format!("{ip} {}\n", self.host_public_key)
        };
        write_private(&known_hosts, &hosts)?;
        let mut ssh = tokio::process::Command::new("ssh");
        ssh.args(&self.options);
        if !self
            .options
            .iter()
            .any(|o| o.contains("StrictHostKeyChecking"))
        {
            let value = if self.strict_host_key_checking {
                "yes"
            } else {
                "no"
            };
            ssh.arg("-o").arg(format!("StrictHostKeyChecking={value}"));
        }
        ssh.arg("-i")
            .arg(&key)
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
            .args(["-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"])
            .arg(format!("{}@{ip}", self.user))
            .arg("--")
            .arg(script)
            .kill_on_drop(true);
        let mut child = ssh.spawn().map_err(|e| format!("running ssh: {e}"))?;
        let status = match limit {
            None => child.wait().await,
            Some(limit) => match tokio::time::timeout(limit, child.wait()).await {
                Ok(status) => status,
                Err(_) => return Err("command timed out".into()),
            },
        }
        .map_err(|e| format!("running ssh: {e}"))?;
        match status.code() {
            Some(0) => Ok(()),
            Some(code) => Err(format!("exit status {code}")),
            None => Err(format!("ssh ended by {status}")),
        }
    }
}

/// Whether a server at `address` takes a connection within 3 s and sends an SSH
/// identification line (`SSH-...`, RFC 4253 4.2; other lines may come first) within 10 s.
async fn ssh_server_answers(address: &str) -> bool {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let connect = tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect(address),
    );
    let Ok(Ok(stream)) = connect.await else {
        return false;
    };
    let mut lines = tokio::io::BufReader::new(stream).take(8192).lines();
    let identified = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("SSH-") {
                return true;
            }
        }
        false
    };
    tokio::time::timeout(Duration::from_secs(10), identified)
        .await
        .unwrap_or(false)
}

fn write_private(path: &Path, contents: &str) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(contents.as_bytes()))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The port of `-p N`, `-pN` or `-p=N` among ssh's options; 22 without one.
fn port_of(options: &[String]) -> Result<u16, String> {
    let mut port = None;
    let mut words = options.iter();
    while let Some(word) = words.next() {
        let Some(rest) = word.strip_prefix("-p") else {
            continue;
        };
        let value = match rest.strip_prefix('=').unwrap_or(rest) {
            "" => words
                .next()
                .ok_or("ssh option requires an argument -- p")?
                .as_str(),
            value => value,
        };
        port = Some(
            value
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("Bad port '{value}'"))?,
        );
    }
    Ok(port.unwrap_or(22))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(entries: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (key, value) in entries {
            std::fs::write(dir.path().join(key), value).expect("write");
        }
        dir
    }

    #[test]
    fn a_complete_secret_reads_as_upstream() {
        let dir = secret(&[
            ("user", "root"),
            ("ssh-privatekey", "KEY"),
            ("disable-strict-host-key-checking", "True"),
            ("additional-ssh-options", "-p 2222 -o 'ConnectTimeout 5'"),
        ]);
        let c = Connection::read(dir.path()).expect("reads");
        assert_eq!(c.private_key, "KEY\n");
        assert_eq!(c.port, 2222);
        assert!(!c.strict_host_key_checking);
        assert_eq!(c.options, ["-p", "2222", "-o", "ConnectTimeout 5"]);
    }

    #[test]
    fn missing_attributes_are_named() {
        let error =
            |entries: &[(&str, &str)]| Connection::read(secret(entries).path()).unwrap_err();
        assert_eq!(error(&[]), "type secret attribute is required");
        assert_eq!(error(&[("type", "Ssh")]), "Ssh is invalid type");
        assert_eq!(
            error(&[("type", "ssh")]),
            "user secret attribute is required"
        );
        assert_eq!(
            error(&[("type", "ssh"), ("user", "u")]),
            "ssh-privatekey secret attribute is required"
        );
        assert_eq!(
            error(&[("user", "u"), ("ssh-private-key", "K")]),
            "host-public-key or disable-strict-host-key-checking=true secret attribute is required"
        );
        assert!(
            Connection::read(Path::new("/nonexistent/secret"))
                .unwrap_err()
                .starts_with("secret does not exist at")
        );
    }

    /// A listener on loopback that answers each connection with `greeting` and closes it.
    async fn server(greeting: &'static [u8]) -> String {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(greeting).await;
            }
        });
        address
    }

    #[tokio::test]
    async fn an_ssh_server_is_known_by_its_identification_line() {
        let sshd = server(b"a banner first\r\nSSH-2.0-OpenSSH_9.2p1 Debian-2\r\n").await;
        assert!(ssh_server_answers(&sshd).await);
        // What QEMU's user-mode forwarding does while nothing listens in the guest.
        let closes = server(b"").await;
        assert!(!ssh_server_answers(&closes).await);
        let other = server(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        assert!(!ssh_server_answers(&other).await);
    }

    #[test]
    fn ports_are_read_in_each_form() {
        let words = |s: &str| shlex::split(s).unwrap();
        assert_eq!(port_of(&words("-p2200")), Ok(2200));
        assert_eq!(port_of(&words("-p=2201")), Ok(2201));
        assert_eq!(port_of(&words("-o X=1")), Ok(22));
        assert_eq!(
            port_of(&words("-p")),
            Err("ssh option requires an argument -- p".into())
        );
        assert_eq!(port_of(&words("-p x")), Err("Bad port 'x'".into()));
    }
}
