//! A pod's service account, as the kubelet projects it: a bound token from a TokenRequest for
//! the pod's account, with the cluster's CA and the pod's namespace, under
//! `/var/run/secrets/kubernetes.io/serviceaccount` in the pod. The processes the agent runs
//! share the machine's root, where a client's in-cluster paths would be the host's, so the
//! agent also writes a kubeconfig naming the same token and points `KUBECONFIG` at it: a
//! program that infers its configuration (kube-rs, client-go) then acts as the pod's account.

use std::path::Path;

use api::pod_contract::under_root;
use k8s_openapi::api::authentication::v1::TokenRequest;
use kube::ResourceExt;
use kube::config::{AuthInfo, Context, Kubeconfig, NamedAuthInfo, NamedContext};
use serde_json::json;

use super::{AgentError, PodRun};

/// Where the kubelet projects a pod's service account.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// How long a projected token lives: a kubelet refreshes its hourly; the agent does not, so
/// it asks for a day, more than any task runs.
const TOKEN_SECONDS: i64 = 24 * 3600;

impl PodRun {
    /// Projects the pod's service account; the `KUBECONFIG` variable that names it, or none
    /// when the pod opts out or its account does not exist (the pod then runs without one,
    /// as every pod did before the agent projected them).
    pub(super) async fn project_service_account(
        &self,
        root: &Path,
    ) -> Result<Option<(String, String)>, AgentError> {
        let spec = self.pod.spec.as_ref();
        if spec.and_then(|s| s.automount_service_account_token) == Some(false) {
            return Ok(None);
        }
        let namespace = self.pod.namespace().unwrap_or_default();
        let account = spec
            .and_then(|s| s.service_account_name.clone())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "default".into());
        let token = match self.request_token(&namespace, &account).await {
            Ok(token) => token,
            Err(kube::Error::Api(status)) if status.code == 404 => {
                tracing::debug!(pod = %self.name(), %account, "no such service account; none projected");
                return Ok(None);
            }
            Err(err) => return Err(err.into()),
        };
        let admin = Kubeconfig::read_from(&self.agent().kubeconfig).map_err(|err| {
            self.error(format!(
                "reading the platform's kubeconfig {}: {err}",
                self.agent().kubeconfig.display()
            ))
        })?;
        let ca = admin
            .clusters
            .first()
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.certificate_authority_data.clone())
            .unwrap_or_default();
        let ca =
            base64_decode(&ca).map_err(|err| self.error(format!("the platform's CA: {err}")))?;
        let kubeconfig = pod_kubeconfig(admin, &namespace, &account, &token);
        let text = serde_json::to_string_pretty(&kubeconfig)
            .map_err(|err| self.error(format!("writing the pod's kubeconfig: {err}")))?;
        let dir = under_root(root, SERVICE_ACCOUNT_DIR);
        let files: [(&str, &[u8]); 4] = [
            ("token", token.as_bytes()),
            ("ca.crt", &ca),
            ("namespace", namespace.as_bytes()),
            ("kubeconfig", text.as_bytes()),
        ];
        std::fs::create_dir_all(&dir).map_err(|source| AgentError::Io {
            what: "creating",
            path: dir.clone(),
            source,
        })?;
        for (name, content) in files {
            let path = dir.join(name);
            std::fs::write(&path, content).map_err(|source| AgentError::Io {
                what: "writing",
                path: path.clone(),
                source,
            })?;
        }
        Ok(Some((
            "KUBECONFIG".into(),
            dir.join("kubeconfig").display().to_string(),
        )))
    }

    async fn request_token(&self, namespace: &str, account: &str) -> Result<String, kube::Error> {
        let body = json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": TOKEN_SECONDS},
        });
        let request = hyper::Request::post(format!(
            "/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
        ))
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(body.to_string().into_bytes())
        .map_err(kube::Error::HttpError)?;
        let answer: TokenRequest = self.agent().client.request(request).await?;
        Ok(answer.status.map(|s| s.token).unwrap_or_default())
    }
}

/// The platform's kubeconfig with its user replaced by the pod's account and its context's
/// namespace by the pod's.
fn pod_kubeconfig(
    mut config: Kubeconfig,
    namespace: &str,
    account: &str,
    token: &str,
) -> Kubeconfig {
    let user = format!("system:serviceaccount:{namespace}:{account}");
    let cluster = config
        .clusters
        .first()
        .map(|c| c.name.clone())
        .unwrap_or_default();
    config.auth_infos = vec![NamedAuthInfo {
        name: user.clone(),
        auth_info: Some(AuthInfo {
            token: Some(token.to_string().into()),
            ..AuthInfo::default()
        }),
        other: Default::default(),
    }];
    config.contexts = vec![NamedContext {
        name: "pod".into(),
        context: Some(Context {
            cluster,
            user: Some(user),
            namespace: Some(namespace.to_string()),
            ..Context::default()
        }),
        other: Default::default(),
    }];
    config.current_context = Some("pod".into());
    config
}

fn base64_decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::config::{Cluster, NamedCluster};

    #[test]
    fn the_pods_kubeconfig_names_its_account_and_namespace_on_the_platforms_cluster() {
        let admin = Kubeconfig {
            clusters: vec![NamedCluster {
                name: "ferrovirt".into(),
                cluster: Some(Cluster {
                    server: Some("https://127.0.0.1:6443".into()),
                    ..Cluster::default()
                }),
                other: Default::default(),
            }],
            auth_infos: vec![NamedAuthInfo {
                name: "admin".into(),
                auth_info: Some(AuthInfo::default()),
                other: Default::default(),
            }],
            ..Kubeconfig::default()
        };
        let config = pod_kubeconfig(admin, "tasks", "runner", "t0k");
        assert_eq!(config.auth_infos.len(), 1, "the admin user is gone");
        assert_eq!(
            config.auth_infos[0].name,
            "system:serviceaccount:tasks:runner"
        );
        let context = config.contexts[0].context.as_ref().expect("context");
        assert_eq!(context.cluster, "ferrovirt");
        assert_eq!(context.namespace.as_deref(), Some("tasks"));
        assert_eq!(config.current_context.as_deref(), Some("pod"));
    }
}
