//! `spec.accessCredentials` of a VirtualMachineInstance: SSH keys and passwords taken from
//! Secrets and put into the guest by cloud-init or the guest agent.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One credential put into the guest: an SSH key or a user password.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessCredential {
    /// SSH public keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_public_key: Option<SshPublicKeyAccessCredential>,
    /// User passwords.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_password: Option<UserPasswordAccessCredential>,
}

impl AccessCredential {
    /// The Secret the credential comes from, whichever kind it is.
    pub fn secret_name(&self) -> Option<&str> {
        let key = self
            .ssh_public_key
            .as_ref()
            .and_then(|k| k.source.secret.as_ref());
        let password = self
            .user_password
            .as_ref()
            .and_then(|p| p.source.secret.as_ref());
        key.or(password).map(|s| s.secret_name.as_str())
    }

    /// The volume KubeVirt mounts the credential's Secret as in the launcher pod, under its
    /// secret directory.
    pub fn volume_name(secret: &str) -> String {
        format!("{secret}-access-cred")
    }
}

/// SSH public keys from a Secret and how they reach the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SshPublicKeyAccessCredential {
    /// How the keys reach the guest.
    pub propagation_method: SshPublicKeyAccessCredentialPropagationMethod,
    /// Where the keys come from.
    pub source: SshPublicKeyAccessCredentialSource,
}

/// How SSH keys reach the guest: one of the three.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SshPublicKeyAccessCredentialPropagationMethod {
    /// Through the config drive's cloud-init data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_drive: Option<ConfigDriveSshPublicKeyAccessCredentialPropagation>,
    /// Through the NoCloud cloud-init data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_cloud: Option<NoCloudSshPublicKeyAccessCredentialPropagation>,
    /// Through the guest agent, into the named users' authorized keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qemu_guest_agent: Option<QemuGuestAgentSshPublicKeyAccessCredentialPropagation>,
}

/// Keys go in the config drive's cloud-init data.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ConfigDriveSshPublicKeyAccessCredentialPropagation {}

/// Keys go in the NoCloud cloud-init data.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NoCloudSshPublicKeyAccessCredentialPropagation {}

/// Keys go through the guest agent into these users' authorized keys.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct QemuGuestAgentSshPublicKeyAccessCredentialPropagation {
    /// The guest users.
    pub users: Vec<String>,
}

/// Where SSH keys come from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct SshPublicKeyAccessCredentialSource {
    /// A Secret whose values are the keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<AccessCredentialSecretSource>,
}

/// A Secret in the instance's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessCredentialSecretSource {
    /// The Secret's name.
    pub secret_name: String,
}

/// User passwords from a Secret and how they reach the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserPasswordAccessCredential {
    /// How the passwords reach the guest.
    pub propagation_method: UserPasswordAccessCredentialPropagationMethod,
    /// Where the passwords come from.
    pub source: UserPasswordAccessCredentialSource,
}

/// How passwords reach the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserPasswordAccessCredentialPropagationMethod {
    /// Through the guest agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qemu_guest_agent: Option<QemuGuestAgentUserPasswordAccessCredentialPropagation>,
}

/// Passwords are set through the guest agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct QemuGuestAgentUserPasswordAccessCredentialPropagation {}

/// Where passwords come from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct UserPasswordAccessCredentialSource {
    /// A Secret mapping user names to passwords.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<AccessCredentialSecretSource>,
}
