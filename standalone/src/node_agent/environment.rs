//! A container's environment: the pod's root and IP, its secondary networks, and its `env`
//! (values, Secret and ConfigMap keys, and fields of the pod).

use std::path::Path;

use api::pod_contract::{POD_IP_ENV, POD_ROOT_ENV};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Secret};
use kube::ResourceExt;
use kube::api::Api;

use super::{AgentError, PodRun};
use crate::secondary_networks;

impl PodRun {
    pub(super) async fn environment(
        &self,
        root: &Path,
        container: &Container,
    ) -> Result<Vec<(String, String)>, AgentError> {
        let namespace = self.pod.namespace().unwrap_or_default();
        let mut env = vec![
            (POD_ROOT_ENV.to_string(), root.display().to_string()),
            (POD_IP_ENV.to_string(), self.ip.to_string()),
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            ),
        ];
        let bridges = secondary_networks::pod_bridges(&self.agent().client, &self.pod)
            .await
            .map_err(|err| self.error(err.to_string()))?;
        if !bridges.is_empty() {
            env.push((
                secondary_networks::POD_BRIDGES_ENV.to_string(),
                secondary_networks::env_value(&bridges),
            ));
        }
        env.extend(self.service_account.clone());
        for var in container.env.iter().flatten() {
            let value = match (&var.value, &var.value_from) {
                (Some(value), _) => value.clone(),
                (None, Some(from)) => {
                    if let Some(key) = &from.secret_key_ref {
                        let secret =
                            Api::<Secret>::namespaced(self.agent().client.clone(), &namespace)
                                .get(&key.name)
                                .await?;
                        let bytes = secret
                            .data
                            .and_then(|d| d.get(&key.key).map(|b| b.0.clone()));
                        String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned()
                    } else if let Some(key) = &from.config_map_key_ref {
                        let map =
                            Api::<ConfigMap>::namespaced(self.agent().client.clone(), &namespace)
                                .get(&key.name)
                                .await?;
                        map.data
                            .and_then(|d| d.get(&key.key).cloned())
                            .unwrap_or_default()
                    } else if let Some(field) = &from.field_ref {
                        self.field(&field.field_path)
                    } else {
                        String::new()
                    }
                }
                (None, None) => String::new(),
            };
            // 0.0.0.0 is the pod's own network; here, its loopback address.
            env.push((
                var.name.clone(),
                value.replace("0.0.0.0:", &format!("{}:", self.ip)),
            ));
        }
        Ok(env)
    }

    pub(super) fn field(&self, path: &str) -> String {
        match path {
            "metadata.name" => self.pod.name_any(),
            "metadata.namespace" => self.pod.namespace().unwrap_or_default(),
            "metadata.uid" => self.pod.uid().unwrap_or_default(),
            "status.podIP" => self.ip.to_string(),
            "spec.nodeName" => self.agent().node.clone(),
            _ => String::new(),
        }
    }
}
