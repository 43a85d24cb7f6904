//! `spec.accessCredentials` put into the guest by its agent, as KubeVirt's launcher does
//! (`virtwrap/access-credentials`): the SSH keys of every `qemuGuestAgent` credential
//! replace the named users' `authorized_keys` (`guest-ssh-add-authorized-keys` with
//! `reset`), and every `userPassword` Secret sets its users' passwords
//! (`guest-set-user-password`). The result becomes the VMI's
//! `AccessCredentialsSynchronized` condition.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use api::kubevirt::VirtualMachineInstance;
use api::kubevirt::vmi::AccessCredential;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::guest_agent::GuestAgent;

/// KubeVirt's message while credentials wait for the agent.
pub const AGENT_OFFLINE: &str = "Guest agent is offline";

/// One credential the agent propagates, with the directory its Secret is mounted at (`None`
/// when the launcher found none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Every key in the Secret's files goes to each of `users`.
    SshKeys {
        secret: String,
        users: Vec<String>,
        dir: Option<PathBuf>,
    },
    /// Each file of the Secret is a user's name; its content that user's password.
    Passwords {
        secret: String,
        dir: Option<PathBuf>,
    },
}

/// The credentials of `vmi` the agent propagates, with their Secrets' directories.
pub fn sources(vmi: &VirtualMachineInstance, dirs: &BTreeMap<String, PathBuf>) -> Vec<Source> {
    let credentials = vmi.spec.access_credentials.iter().flatten();
    credentials.filter_map(|c| source(c, dirs)).collect()
}

fn source(credential: &AccessCredential, dirs: &BTreeMap<String, PathBuf>) -> Option<Source> {
    let secret = credential.secret_name()?.to_owned();
    let dir = dirs.get(&secret).cloned();
    if let Some(key) = &credential.ssh_public_key {
        let agent = key.propagation_method.qemu_guest_agent.as_ref()?;
        return Some(Source::SshKeys {
            secret,
            users: agent.users.clone(),
            dir,
        });
    }
    let password = credential.user_password.as_ref()?;
    password.propagation_method.qemu_guest_agent.as_ref()?;
    Some(Source::Passwords { secret, dir })
}

/// What the guest should hold: each user's authorized keys, and passwords by user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    pub keys: BTreeMap<String, Vec<String>>,
    pub passwords: BTreeMap<String, String>,
}

/// How the last propagation went, as the launcher reports it to virt-handler.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncResult {
    pub succeeded: bool,
    pub message: String,
}

impl SyncResult {
    pub fn failed(message: impl Into<String>) -> Self {
        SyncResult {
            succeeded: false,
            message: message.into(),
        }
    }
}

/// Reads the Secrets' files into what the guest should hold.
pub fn read(sources: &[Source]) -> Result<Desired, String> {
    let mut desired = Desired::default();
    for source in sources {
        match source {
            Source::SshKeys { secret, users, dir } => {
                let keys: Vec<String> = secret_files(secret, dir.as_deref())?
                    .iter()
                    .flat_map(|(_, content)| keys_in(content))
                    .collect();
                for user in users {
                    desired
                        .keys
                        .entry(user.clone())
                        .or_default()
                        .extend(keys.iter().cloned());
                }
            }
            Source::Passwords { secret, dir } => {
                for (user, content) in secret_files(secret, dir.as_deref())? {
                    let password = content.trim();
                    if !password.is_empty() {
                        desired.passwords.insert(user, password.to_owned());
                    }
                }
            }
        }
    }
    Ok(desired)
}

/// The non-empty lines of a key file, trimmed.
fn keys_in(content: &str) -> impl Iterator<Item = String> + '_ {
    content
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
}

/// The files of a mounted Secret, by name: not the `..data`-style entries a kubelet makes
/// for atomic updates, nor directories.
fn secret_files(secret: &str, dir: Option<&Path>) -> Result<Vec<(String, String)>, String> {
    let dir = dir.ok_or_else(|| format!("the Secret {secret:?} is not mounted in the pod"))?;
    let entries = std::fs::read_dir(dir).map_err(|e| {
        format!(
            "error occurred while reading the list of secrets files from the base directory {}: {e}",
            dir.display()
        )
    })?;
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with("..") || path.is_dir() {
            continue;
        }
        let content = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "error occurred while reading the access credential secret file [{}]: {e}",
                path.display()
            )
        })?;
        files.push((name, content));
    }
    files.sort();
    Ok(files)
}

/// Puts `desired` into the guest through `agent`; the message names the first user that
/// failed, in KubeVirt's words.
pub async fn apply(agent: &mut GuestAgent, desired: &Desired) -> SyncResult {
    for (user, keys) in &desired.keys {
        let arguments = json!({"username": user, "keys": keys, "reset": true});
        if let Err(e) = agent
            .execute("guest-ssh-add-authorized-keys", Some(arguments))
            .await
        {
            return SyncResult::failed(format!(
                "Error encountered writing ssh pub key access credentials for user [{user}]: {e}"
            ));
        }
    }
    for (user, password) in &desired.passwords {
        let encoded = base64::engine::general_purpose::STANDARD.encode(password);
        let arguments = json!({"username": user, "password": encoded, "crypted": false});
        if let Err(e) = agent
            .execute("guest-set-user-password", Some(arguments))
            .await
        {
            return SyncResult::failed(format!(
                "Error encountered setting password for user [{user}]: {e}"
            ));
        }
    }
    SyncResult {
        succeeded: true,
        message: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi(credentials: serde_json::Value) -> VirtualMachineInstance {
        serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "v"},
            "spec": {"domain": {"devices": {}}, "accessCredentials": credentials},
        }))
        .unwrap()
    }

    #[test]
    fn only_the_agent_s_credentials_are_its_sources() {
        let vmi = vmi(json!([
            {"sshPublicKey": {"source": {"secret": {"secretName": "cloud"}},
                "propagationMethod": {"noCloud": {}}}},
            {"sshPublicKey": {"source": {"secret": {"secretName": "keys"}},
                "propagationMethod": {"qemuGuestAgent": {"users": ["root", "fedora"]}}}},
            {"userPassword": {"source": {"secret": {"secretName": "pw"}},
                "propagationMethod": {"qemuGuestAgent": {}}}},
        ]));
        let dirs = BTreeMap::from([("keys".to_owned(), PathBuf::from("/k"))]);
        assert_eq!(
            sources(&vmi, &dirs),
            [
                Source::SshKeys {
                    secret: "keys".into(),
                    users: vec!["root".into(), "fedora".into()],
                    dir: Some("/k".into()),
                },
                Source::Passwords {
                    secret: "pw".into(),
                    dir: None,
                },
            ]
        );
    }

    #[test]
    fn keys_from_every_file_go_to_every_user_and_passwords_by_file_name() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let passwords = dir.path().join("passwords");
        std::fs::create_dir_all(keys.join("..2026_11_29")).unwrap();
        std::fs::create_dir_all(&passwords).unwrap();
        std::fs::write(
            keys.join("a"),
            "ssh-ed25519 AAA one\n\n  ssh-rsa BBB two  \n",
        )
        .unwrap();
        std::fs::write(keys.join("b"), "ssh-ed25519 CCC three").unwrap();
        std::fs::write(passwords.join("root"), "s3cret\n").unwrap();
        std::fs::write(passwords.join("nobody"), "  \n").unwrap();
        let desired = read(&[
            Source::SshKeys {
                secret: "k".into(),
                users: vec!["root".into(), "debian".into()],
                dir: Some(keys),
            },
            Source::Passwords {
                secret: "p".into(),
                dir: Some(passwords),
            },
        ])
        .unwrap();
        let all = vec![
            "ssh-ed25519 AAA one".to_owned(),
            "ssh-rsa BBB two".to_owned(),
            "ssh-ed25519 CCC three".to_owned(),
        ];
        assert_eq!(desired.keys["root"], all);
        assert_eq!(desired.keys["debian"], all);
        assert_eq!(
            desired.passwords,
            BTreeMap::from([("root".to_owned(), "s3cret".to_owned())])
        );
    }

    #[test]
    fn a_secret_that_is_not_there_is_named() {
        let error = read(&[Source::Passwords {
            secret: "pw".into(),
            dir: None,
        }])
        .unwrap_err();
        assert!(error.contains("\"pw\""), "{error}");
        let error = read(&[Source::Passwords {
            secret: "pw".into(),
            dir: Some("/nonexistent/pw-access-cred".into()),
        }])
        .unwrap_err();
        assert!(error.contains("/nonexistent/pw-access-cred"), "{error}");
    }
}
