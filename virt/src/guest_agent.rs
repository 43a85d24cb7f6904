//! A client of the QEMU guest agent (qemu-ga) on the `org.qemu.guest_agent.0` channel.
//! The channel carries whatever an earlier, interrupted exchange left behind, so every
//! session begins with `guest-sync-delimited`: the agent answers with a 0xFF byte and our
//! random id, and everything before it is discarded. Answers are checked field by field;
//! anything malformed is an error, never a panic.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// The longest answer accepted (interface and filesystem lists of a large guest).
const MAX_ANSWER: u64 = 4 << 20;

/// Why the agent could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum GuestAgentError {
    #[error("guest agent channel: {0}")]
    Io(#[from] std::io::Error),
    #[error("the guest agent did not answer within {0:?}")]
    Timeout(Duration),
    #[error("guest agent {command}: {desc}")]
    Command { command: String, desc: String },
    #[error("guest agent protocol: {0}")]
    Protocol(String),
}

/// What the guest agent tells about the guest, in KubeVirt's shapes
/// (`VirtualMachineInstanceGuestAgentInfo`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuestInfo {
    pub guest_agent_version: String,
    pub hostname: String,
    pub os: GuestOsInfo,
    pub interfaces: Vec<GuestInterface>,
    pub user_list: Vec<GuestUser>,
    pub fs_info: Vec<GuestFilesystem>,
}

/// The guest OS (`status.guestOSInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuestOsInfo {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_release: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pretty_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub machine: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
}

/// A guest network interface with its addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuestInterface {
    pub interface_name: String,
    pub mac: String,
    pub ip_addresses: Vec<String>,
}

/// A logged-in user.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuestUser {
    pub user_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub domain: String,
    pub login_time: f64,
}

/// A mounted filesystem.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GuestFilesystem {
    pub disk_name: String,
    pub mount_point: String,
    pub file_system_type: String,
    pub used_bytes: u64,
    pub total_bytes: u64,
}

/// One session with the agent.
pub struct GuestAgent {
    stream: BufReader<UnixStream>,
    timeout: Duration,
}

impl GuestAgent {
    /// Connects to the channel's socket and synchronises with the agent; fails with
    /// [`GuestAgentError::Timeout`] when no agent runs in the guest.
    pub async fn connect(socket: &Path, timeout: Duration) -> Result<Self, GuestAgentError> {
        let stream = UnixStream::connect(socket).await?;
        let mut agent = Self {
            stream: BufReader::new(stream),
            timeout,
        };
        agent.sync().await?;
        Ok(agent)
    }

    async fn sync(&mut self) -> Result<(), GuestAgentError> {
        let id = u64::from(std::process::id()) << 32 | u64::from(rand_u32());
        let request = json!({"execute": "guest-sync-delimited", "arguments": {"id": id}});
        self.send(&request).await?;
        let deadline = self.timeout;
        tokio::time::timeout(deadline, async {
            loop {
                // Skip to the delimiter, then read the answer line.
                let mut skipped = Vec::new();
                (&mut self.stream)
                    .take(MAX_ANSWER)
                    .read_until(0xff, &mut skipped)
                    .await?;
                if skipped.last() != Some(&0xff) {
                    return Err(GuestAgentError::Protocol("the channel closed".into()));
                }
                let answer = self.read_line().await?;
                if answer.get("return").and_then(Value::as_u64) == Some(id) {
                    return Ok(());
                }
            }
        })
        .await
        .map_err(|_| GuestAgentError::Timeout(deadline))?
    }

    async fn send(&mut self, request: &Value) -> Result<(), GuestAgentError> {
        let mut line = request.to_string();
        line.push('\n');
        self.stream.get_mut().write_all(line.as_bytes()).await?;
        Ok(())
    }

    async fn read_line(&mut self) -> Result<Value, GuestAgentError> {
        let mut line = Vec::new();
        (&mut self.stream)
            .take(MAX_ANSWER)
            .read_until(b'\n', &mut line)
            .await?;
        if line.is_empty() {
            return Err(GuestAgentError::Protocol("the channel closed".into()));
        }
        // A delimiter byte can precede an answer after a resync; it is not JSON.
        let start = line.iter().position(|b| *b != 0xff).unwrap_or(line.len());
        serde_json::from_slice(&line[start..])
            .map_err(|e| GuestAgentError::Protocol(format!("not JSON: {e}")))
    }

    /// Runs `command` and returns its `return` value.
    pub async fn execute(
        &mut self,
        command: &str,
        arguments: Option<Value>,
    ) -> Result<Value, GuestAgentError> {
        let mut request = json!({"execute": command});
        if let Some(arguments) = arguments {
            request["arguments"] = arguments;
        }
        self.send(&request).await?;
        let answer = tokio::time::timeout(self.timeout, self.read_line())
            .await
            .map_err(|_| GuestAgentError::Timeout(self.timeout))??;
        if let Some(value) = answer.get("return") {
            return Ok(value.clone());
        }
        let desc = answer
            .pointer("/error/desc")
            .and_then(Value::as_str)
            .unwrap_or("an answer with neither return nor error")
            .to_owned();
        Err(GuestAgentError::Command {
            command: command.to_owned(),
            desc,
        })
    }

    /// Everything KubeVirt reports from the agent. Commands an old agent lacks leave their
    /// part empty.
    pub async fn guest_info(&mut self) -> Result<GuestInfo, GuestAgentError> {
        let info = self.execute("guest-info", None).await?;
        let mut out = GuestInfo {
            guest_agent_version: text(&info, "version"),
            ..GuestInfo::default()
        };
        if let Some(os) = self.optional("guest-get-osinfo").await? {
            out.os = GuestOsInfo {
                name: text(&os, "name"),
                kernel_release: text(&os, "kernel-release"),
                version: text(&os, "version"),
                pretty_name: text(&os, "pretty-name"),
                version_id: text(&os, "version-id"),
                kernel_version: text(&os, "kernel-version"),
                machine: text(&os, "machine"),
                id: text(&os, "id"),
            };
        }
        if let Some(host) = self.optional("guest-get-host-name").await? {
            out.hostname = text(&host, "host-name");
        }
        if let Some(list) = self.optional("guest-network-get-interfaces").await? {
            out.interfaces = list
                .as_array()
                .into_iter()
                .flatten()
                .map(interface)
                .collect();
        }
        if let Some(list) = self.optional("guest-get-users").await? {
            out.user_list = list
                .as_array()
                .into_iter()
                .flatten()
                .map(|u| GuestUser {
                    user_name: text(u, "user"),
                    domain: text(u, "domain"),
                    login_time: u.get("login-time").and_then(Value::as_f64).unwrap_or(0.0),
                })
                .collect();
        }
        if let Some(list) = self.optional("guest-get-fsinfo").await? {
            out.fs_info = list
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| GuestFilesystem {
                    disk_name: text(f, "name"),
                    mount_point: text(f, "mountpoint"),
                    file_system_type: text(f, "type"),
                    used_bytes: f.get("used-bytes").and_then(Value::as_u64).unwrap_or(0),
                    total_bytes: f.get("total-bytes").and_then(Value::as_u64).unwrap_or(0),
                })
                .collect();
        }
        Ok(out)
    }

    /// Runs a command an older agent may lack: its refusal is `None`; a timeout or a broken
    /// exchange is an error, as the channel is then out of step.
    async fn optional(&mut self, command: &str) -> Result<Option<Value>, GuestAgentError> {
        match self.execute(command, None).await {
            Ok(value) => Ok(Some(value)),
            Err(GuestAgentError::Command { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Asks the guest to power off or reboot (`mode`: `powerdown`, `reboot`).
    pub async fn shutdown(&mut self, mode: &str) -> Result<(), GuestAgentError> {
        // The agent does not answer guest-shutdown when it succeeds.
        self.send(&json!({"execute": "guest-shutdown", "arguments": {"mode": mode}}))
            .await
    }
}

fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

fn interface(value: &Value) -> GuestInterface {
    GuestInterface {
        interface_name: text(value, "name"),
        mac: text(value, "hardware-address"),
        ip_addresses: value
            .get("ip-addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| a.get("ip-address").and_then(Value::as_str))
            .map(str::to_owned)
            .collect(),
    }
}

/// A random id for `guest-sync-delimited`; collisions only cost a resync.
fn rand_u32() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    nanos ^ 0x9e37_79b9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_map_to_kubevirts_shape() {
        let v = json!({
            "name": "eth0",
            "hardware-address": "52:54:00:aa:bb:cc",
            "ip-addresses": [
                {"ip-address-type": "ipv4", "ip-address": "10.0.2.2", "prefix": 24},
                {"ip-address-type": "ipv6", "ip-address": "fe80::1", "prefix": 64}
            ]
        });
        let i = interface(&v);
        assert_eq!(i.interface_name, "eth0");
        assert_eq!(i.ip_addresses, ["10.0.2.2", "fe80::1"]);
    }
}
