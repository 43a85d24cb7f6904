//! generate-ssh-keys: makes a key pair with the system's `ssh-keygen` and puts the public key
//! into a Secret (appended to an existing one, or a new one) for a VM's accessCredentials,
//! and the private key with the connection options into a new `kubernetes.io/ssh-auth`
//! Secret in execute-in-vm's format. A run that fails half way removes what it created.

use std::collections::BTreeMap;

use clap::Args;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::failure::{FailWith, TaskFailure, TaskResult};
use crate::objects::{Cluster, is_not_found};
use crate::results::Results;

/// Upstream's exit codes.
mod exit {
    pub const INVALID_ARGUMENTS: i32 = -1;
    pub const KEYGEN_FAILED: i32 = -2;
    pub const PRIVATE_KEY_EXISTS: i32 = -3;
    pub const CLIENT: i32 = -4;
    pub const PUBLIC_KEY_FETCH: i32 = -5;
    pub const PUBLIC_KEY_CREATE: i32 = -6;
    pub const PRIVATE_KEY_CREATE: i32 = -7;
    pub const WRITE_RESULTS: i32 = -8;
}

#[derive(Args, Debug, Default)]
pub struct GenerateSshKeysArgs {
    /// A new or existing Secret to add the public key to [default: a new `public-key-` one].
    #[arg(
        long = "public-key-secret-name",
        env = "PUBLIC_KEY_SECRET_NAME",
        default_value = ""
    )]
    public_name: String,
    /// Its namespace [default: the active namespace].
    #[arg(
        long = "public-key-secret-namespace",
        env = "PUBLIC_KEY_SECRET_NAMESPACE",
        default_value = ""
    )]
    public_namespace: String,
    /// A new Secret for the private key [default: a new `private-key-` one].
    #[arg(
        long = "private-key-secret-name",
        env = "PRIVATE_KEY_SECRET_NAME",
        default_value = ""
    )]
    private_name: String,
    /// Its namespace [default: the active namespace].
    #[arg(
        long = "private-key-secret-namespace",
        env = "PRIVATE_KEY_SECRET_NAMESPACE",
        default_value = ""
    )]
    private_namespace: String,
    /// More `ssh-keygen` options.
    #[arg(
        long = "additional-ssh-keygen-options",
        env = "ADDITIONAL_SSH_KEYGEN_OPTIONS",
        default_value = ""
    )]
    keygen_options: String,
    /// More logging.
    #[arg(long)]
    debug: bool,
    /// Connection options for the private key's Secret, `KEY:VALUE` each (after `--`).
    #[arg(last = true)]
    connection_options: Vec<String>,
}

/// The checked flags.
#[derive(Debug, PartialEq)]
struct Plan {
    public_name: String,
    public_namespace: String,
    private_name: String,
    private_namespace: String,
    keygen: Vec<String>,
    connection: BTreeMap<String, String>,
}

pub async fn run(args: GenerateSshKeysArgs, results: &Results) -> TaskResult {
    let cluster = Cluster::connect().await.fail_with(exit::CLIENT, "")?;
    let plan = plan(&args, &cluster.active_namespace)
        .map_err(|m| TaskFailure::new(exit::INVALID_ARGUMENTS, m))?;
    let dir = tempfile::tempdir().fail_with(exit::KEYGEN_FAILED, "")?;
    let (private_key, public_key) = keygen(&plan.keygen, dir.path()).await?;
    let private_api: Api<Secret> = Api::namespaced(cluster.client.clone(), &plan.private_namespace);
    if !plan.private_name.is_empty() {
        match private_api.get(&plan.private_name).await {
            Ok(_) => {
                return Err(TaskFailure::new(
                    exit::PRIVATE_KEY_EXISTS,
                    format!("{} secret already exists", plan.private_name),
                ));
            }
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                return Err(TaskFailure::new(
                    exit::PRIVATE_KEY_EXISTS,
                    format!(
                        "error occurred while checking that {} secret should not exist: {e}",
                        plan.private_name
                    ),
                ));
            }
        }
    }
    let public_api: Api<Secret> = Api::namespaced(cluster.client.clone(), &plan.public_namespace);
    let (public, created_public) =
        put_public_key(&public_api, &plan.public_name, &public_key).await?;
    let mut data = plan.connection.clone();
    data.insert("ssh-privatekey".into(), private_key);
    let private = Secret {
        metadata: named(&plan.private_name, "private-key-"),
        type_: Some("kubernetes.io/ssh-auth".into()),
        string_data: Some(data),
        ..Default::default()
    };
    let private = match private_api.create(&PostParams::default(), &private).await {
        Ok(secret) => secret,
        Err(e) => {
            if created_public {
                remove(&public_api, &public).await;
            }
            return Err(TaskFailure::new(exit::PRIVATE_KEY_CREATE, e.to_string()));
        }
    };
    let written = results.write_all(&[
        ("publicKeySecretName", &public),
        ("publicKeySecretNamespace", &plan.public_namespace),
        (
            "privateKeySecretName",
            private.metadata.name.as_deref().unwrap_or_default(),
        ),
        ("privateKeySecretNamespace", &plan.private_namespace),
    ]);
    if let Err(e) = written {
        remove(&public_api, &public).await;
        remove(
            &private_api,
            private.metadata.name.as_deref().unwrap_or_default(),
        )
        .await;
        return Err(TaskFailure::new(exit::WRITE_RESULTS, e.to_string()));
    }
    Ok(())
}

fn plan(args: &GenerateSshKeysArgs, active_namespace: &str) -> Result<Plan, String> {
    let checked = |option: &str, value: &str| -> Result<String, String> {
        let value = value.trim();
        if !value.is_empty() && !api::validation::is_dns1123_subdomain(value) {
            return Err(format!(
                "invalid {option} value: {}",
                api::validation::DNS1123_SUBDOMAIN_MESSAGE
            ));
        }
        Ok(value.to_owned())
    };
    let or_active = |n: String| {
        if n.is_empty() {
            active_namespace.to_owned()
        } else {
            n
        }
    };
    let public_name = checked("public-key-secret-name", &args.public_name)?;
    let public_namespace = or_active(checked(
        "public-key-secret-namespace",
        &args.public_namespace,
    )?);
    let private_name = checked("private-key-secret-name", &args.private_name)?;
    let private_namespace = or_active(checked(
        "private-key-secret-namespace",
        &args.private_namespace,
    )?);
    let connection = connection_options(&args.connection_options)?;
    let user = connection.get("user").map_or("default", String::as_str);
    let keygen = keygen_args(&args.keygen_options, user)?;
    Ok(Plan {
        public_name,
        public_namespace,
        private_name,
        private_namespace,
        keygen,
        connection,
    })
}

/// `KEY:VALUE` words; a word with no `:` continues the previous value (upstream's step
/// splits array parameters on spaces, and this puts them together again).
fn connection_options(words: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut options = BTreeMap::new();
    let mut last: Option<String> = None;
    for word in words {
        let word = word.trim_start();
        match (word.split_once(':'), &last) {
            (Some((key, value)), _) if !key.trim().is_empty() => {
                let key = key.trim().to_owned();
                options.insert(key.clone(), value.to_owned());
                last = Some(key);
            }
            (None, Some(key)) => {
                let value: &mut String = options.entry(key.clone()).or_default();
                value.push(' ');
                value.push_str(word);
            }
            _ => {
                return Err(format!(
                    "invalid private-key connection options: no key found before \"{word}\"; pair should be in \"KEY:VAL\" format"
                ));
            }
        }
    }
    Ok(options)
}

/// ssh-keygen's arguments: the user's, with upstream's defaults for what they leave out
/// (`-t rsa`, `-b 4096` for rsa, an empty passphrase, `-C USER@generated`); the key file is
/// added when it runs.
fn keygen_args(options: &str, user: &str) -> Result<Vec<String>, String> {
    let mut args = shlex::split(options)
        .ok_or_else(|| format!("additional-ssh-keygen-options: cannot split {options:?}"))?;
    let value_of = |args: &[String], flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let has = |args: &[String], flag: &str| args.iter().any(|a| a == flag);
    if !has(&args, "-t") {
        args.extend(["-t".into(), "rsa".into()]);
    }
    if value_of(&args, "-t").as_deref() == Some("rsa") && !has(&args, "-b") {
        args.extend(["-b".into(), "4096".into()]);
    }
    if !has(&args, "-N") {
        args.extend(["-N".into(), String::new()]);
    }
    if !has(&args, "-C") {
        args.extend(["-C".into(), format!("{user}@generated")]);
    }
    Ok(args)
}

async fn keygen(args: &[String], dir: &std::path::Path) -> TaskResult<(String, String)> {
    let key = dir.join("id_rsa");
    let status = tokio::process::Command::new("ssh-keygen")
        .args(args)
        .arg("-f")
        .arg(&key)
        .stdin(std::process::Stdio::null())
        .status()
        .await
        .fail_with(exit::KEYGEN_FAILED, "running ssh-keygen")?;
    if !status.success() {
        return Err(TaskFailure::new(
            exit::KEYGEN_FAILED,
            format!("ssh-keygen: {status}"),
        ));
    }
    let private = std::fs::read_to_string(&key).fail_with(exit::KEYGEN_FAILED, "")?;
    let public =
        std::fs::read_to_string(dir.join("id_rsa.pub")).fail_with(exit::KEYGEN_FAILED, "")?;
    Ok((private, public))
}

/// Adds the public key to Secret `name` if it exists (under a new `id-rsa-XXXXX.pub` key),
/// else creates it (`public-key-...` when unnamed); its name, and whether it was created.
async fn put_public_key(api: &Api<Secret>, name: &str, key: &str) -> TaskResult<(String, bool)> {
    let existing = if name.is_empty() {
        None
    } else {
        match api.get(name).await {
            Ok(secret) => Some(secret),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(TaskFailure::new(exit::PUBLIC_KEY_FETCH, e.to_string())),
        }
    };
    let fail = |e: kube::Error| TaskFailure::new(exit::PUBLIC_KEY_CREATE, e.to_string());
    if let Some(secret) = existing {
        let taken = secret.data.unwrap_or_default();
        let id = loop {
            let id = format!("id-rsa-{}.pub", api::common::random_name_suffix());
            if !taken.contains_key(&id) {
                break id;
            }
        };
        let encoded = k8s_openapi::ByteString(key.as_bytes().to_vec());
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "add", "path": format!("/data/{id}"), "value": encoded}
        ]))
        .map_err(|e| TaskFailure::new(exit::PUBLIC_KEY_CREATE, e.to_string()))?;
        api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
            .map_err(fail)?;
        return Ok((name.to_owned(), false));
    }
    let id = format!("id-rsa-{}.pub", api::common::random_name_suffix());
    let secret = Secret {
        metadata: named(name, "public-key-"),
        string_data: Some(BTreeMap::from([(id, key.to_owned())])),
        ..Default::default()
    };
    let created = api
        .create(&PostParams::default(), &secret)
        .await
        .map_err(fail)?;
    Ok((created.metadata.name.unwrap_or_default(), true))
}

fn named(name: &str, generate: &str) -> kube::api::ObjectMeta {
    if name.is_empty() {
        kube::api::ObjectMeta {
            generate_name: Some(generate.into()),
            ..Default::default()
        }
    } else {
        kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        }
    }
}

async fn remove(api: &Api<Secret>, name: &str) {
    if let Err(e) = api.delete(name, &DeleteParams::default()).await {
        tracing::warn!(name, error = %e, "removing a Secret this run made");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn split_options_are_put_together_again() {
        let options = connection_options(&words(&[
            "user:fedora",
            "additional-ssh-options:-p",
            "2222",
            " host-public-key:ssh-ed25519 AAAA",
        ]))
        .unwrap();
        assert_eq!(options["user"], "fedora");
        assert_eq!(options["additional-ssh-options"], "-p 2222");
        assert_eq!(options["host-public-key"], "ssh-ed25519 AAAA");
        let error = connection_options(&words(&["lonely"])).unwrap_err();
        assert!(error.contains("no key found before \"lonely\""), "{error}");
    }

    #[test]
    fn keygen_gets_upstreams_defaults() {
        assert_eq!(
            keygen_args("", "fedora").unwrap(),
            [
                "-t",
                "rsa",
                "-b",
                "4096",
                "-N",
                "",
                "-C",
                "fedora@generated"
            ]
        );
        assert_eq!(
            keygen_args("-t ed25519 -C me", "x").unwrap(),
            ["-t", "ed25519", "-C", "me", "-N", ""]
        );
    }

    #[test]
    fn names_are_checked() {
        let args = GenerateSshKeysArgs {
            public_name: "Bad_Name".into(),
            ..Default::default()
        };
        let error = plan(&args, "ns").unwrap_err();
        assert!(
            error.starts_with("invalid public-key-secret-name value"),
            "{error}"
        );
        let ok = plan(&GenerateSshKeysArgs::default(), "ns").unwrap();
        assert_eq!(
            (ok.public_namespace.as_str(), ok.private_name.as_str()),
            ("ns", "")
        );
    }
}
