//! The cluster as the tasks see it: a client from the service account (or a kubeconfig
//! outside a pod), the active namespace, the kinds the tasks touch as dynamic resources, the
//! VM subresources, and an object printed as the tasks print it.

use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, Config};
use serde_json::Value;

/// A client and the namespace the tasks default to.
#[derive(Clone)]
pub struct Cluster {
    /// The API client.
    pub client: Client,
    /// The service account's namespace in a pod, else the kubeconfig context's.
    pub active_namespace: String,
}

impl Cluster {
    /// In-cluster configuration in a pod, else `KUBECONFIG` or `~/.kube/config`.
    pub async fn connect() -> Result<Self, kube::Error> {
        let config = Config::infer().await.map_err(kube::Error::InferConfig)?;
        let active_namespace = config.default_namespace.clone();
        let client = Client::try_from(config)?;
        Ok(Self {
            client,
            active_namespace,
        })
    }

    /// `namespace` if given, else the active namespace.
    pub fn namespace_or_active(&self, namespace: &str) -> String {
        if namespace.is_empty() {
            self.active_namespace.clone()
        } else {
            namespace.to_owned()
        }
    }

    /// The API of `kind` in `namespace`.
    pub fn api(&self, kind: Kind, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &kind.resource())
    }

    /// `PUT`s a VM subresource (`start`, `stop`, `restart`) with an empty body.
    pub async fn vm_subresource(
        &self,
        namespace: &str,
        name: &str,
        verb: &str,
    ) -> Result<(), kube::Error> {
        let path = format!(
            "/apis/subresources.kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{name}/{verb}"
        );
        let request = http::Request::put(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(b"{}".to_vec())
            .map_err(kube::Error::HttpError)?;
        self.client.request_text(request).await.map(|_| ())
    }
}

/// The kinds the tasks read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    VirtualMachine,
    VirtualMachineInstance,
    DataVolume,
    DataSource,
    PersistentVolumeClaim,
    Secret,
    Pod,
}

impl Kind {
    /// The resource: group, version, kind and plural.
    pub fn resource(self) -> ApiResource {
        let (group, version, kind, plural) = match self {
            Self::VirtualMachine => ("kubevirt.io", "v1", "VirtualMachine", "virtualmachines"),
            Self::VirtualMachineInstance => (
                "kubevirt.io",
                "v1",
                "VirtualMachineInstance",
                "virtualmachineinstances",
            ),
            Self::DataVolume => ("cdi.kubevirt.io", "v1beta1", "DataVolume", "datavolumes"),
            Self::DataSource => ("cdi.kubevirt.io", "v1beta1", "DataSource", "datasources"),
            Self::PersistentVolumeClaim => {
                ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims")
            }
            Self::Secret => ("", "v1", "Secret", "secrets"),
            Self::Pod => ("", "v1", "Pod", "pods"),
        };
        let api_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version,
            kind: kind.into(),
            plural: plural.into(),
        }
    }
}

/// Whether `error` is the API's NotFound.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// How `-o`/`--output` prints an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    None,
    Yaml,
    Json,
}

impl Output {
    /// Parses `-o`: empty, `yaml` or `json`.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "" => Ok(Self::None),
            "yaml" => Ok(Self::Yaml),
            "json" => Ok(Self::Json),
            other => Err(format!("{other} is not a valid output type")),
        }
    }

    /// `object` as this output prints it (nothing for `None`).
    pub fn render(self, object: &Value) -> String {
        match self {
            Self::None => String::new(),
            Self::Yaml => serde_saphyr::to_string(object).unwrap_or_default(),
            Self::Json => {
                // Upstream indents by four spaces.
                let mut out = Vec::new();
                let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
                let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
                let _ = serde::Serialize::serialize(object, &mut serializer);
                String::from_utf8(out).unwrap_or_default() + "\n"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_types_are_upstreams() {
        assert_eq!(Output::parse("yaml"), Ok(Output::Yaml));
        assert_eq!(
            Output::parse("xml"),
            Err("xml is not a valid output type".to_owned())
        );
        let object = serde_json::json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine"});
        assert!(
            Output::Yaml
                .render(&object)
                .starts_with("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\n")
        );
        assert!(Output::Json.render(&object).contains("\n    \"kind\""));
        assert_eq!(Output::None.render(&object), "");
    }

    #[test]
    fn core_kinds_have_no_group() {
        assert_eq!(Kind::Secret.resource().api_version, "v1");
        assert_eq!(
            Kind::DataVolume.resource().api_version,
            "cdi.kubevirt.io/v1beta1"
        );
    }
}
