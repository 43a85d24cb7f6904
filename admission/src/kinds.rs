//! One entry point for admission: given any object as JSON, apply the defaulting and
//! validation of its kind, as the upstream mutating and validating webhooks would. The
//! embedded API server and the webhook servers call this; kinds without rules pass unchanged.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use api::cdi::datavolume::DataVolumeContentType;
use api::cdi::{self, DataImportCron, DataSource, DataVolume};
use api::cnao::{self, NetworkAddonsConfig};
use api::hostpath::{self, HostPathProvisioner};
use api::kubevirt::cluster_config::ClusterConfig;
use api::kubevirt::{self, VirtualMachine, VirtualMachineInstance};
use api::upload::{self, UploadTokenRequest};
use api::validation::{FieldPath, Problem, ValidationError, join};

/// Why an object is not admitted.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// A field breaks a rule of its kind.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The object does not have the shape of its kind.
    #[error("not a valid {kind}: {source}")]
    Malformed {
        /// The kind it claims to be.
        kind: String,
        /// What did not parse.
        source: serde_json::Error,
    },
}

/// Defaults and validates `object` in place according to its `apiVersion` and `kind`.
pub fn admit(object: &mut Value) -> Result<(), AdmissionError> {
    admit_in(object, &ClusterConfig::default())
}

/// [`admit`] on a cluster configured by `cluster` (the active KubeVirt CR's configuration,
/// which virt-api's defaulting of VirtualMachineInstances reads).
pub fn admit_in(object: &mut Value, cluster: &ClusterConfig) -> Result<(), AdmissionError> {
    let text = |key: &str| {
        object
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let api_version = text("apiVersion");
    let kind = text("kind");
    let kind = kind.as_str();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    match (group, kind) {
        (cdi::GROUP, "DataVolume") => {
            check_content_type(object, "/spec/contentType", &FieldPath::new("spec"))?;
            rewrite(object, kind, |dv: &mut DataVolume| {
                cdi::default::default_data_volume(dv);
                crate::cdi::validate::validate_data_volume(dv)
            })
        }
        (cdi::GROUP, "DataSource") => rewrite(object, kind, |ds: &mut DataSource| {
            crate::cdi::validate::validate_data_source(ds)
        }),
        (cdi::GROUP, "DataImportCron") => {
            let template_spec = FieldPath::new("spec").child("template").child("spec");
            check_content_type(object, "/spec/template/spec/contentType", &template_spec)?;
            rewrite(object, kind, |cron: &mut DataImportCron| {
                cdi::default::default_data_volume_spec(&mut cron.spec.template.spec);
                crate::cdi::validate::validate_data_import_cron(cron)
            })
        }
        ("upload.cdi.kubevirt.io", "UploadTokenRequest") => {
            rewrite(object, kind, |req: &mut UploadTokenRequest| {
                upload::validate_upload_token_request(req)
            })
        }
        (hostpath::GROUP, "HostPathProvisioner") => {
            rewrite(object, kind, |hpp: &mut HostPathProvisioner| {
                hostpath::default::default_host_path_provisioner(hpp);
                crate::hostpath::validate::validate_host_path_provisioner(hpp)
            })
        }
        (kubevirt::GROUP, "VirtualMachine") => {
            crate::kubevirt::validate::validate_virtual_machine_json(object)?;
            rewrite(object, kind, |vm: &mut VirtualMachine| {
                kubevirt::default::default_virtual_machine(vm);
                crate::kubevirt::validate::validate_virtual_machine(vm)
            })
        }
        (cnao::GROUP, "NetworkAddonsConfig") => {
            // Validation only: the object is stored as sent.
            let config: NetworkAddonsConfig =
                serde_json::from_value(object.clone()).map_err(|source| {
                    AdmissionError::Malformed {
                        kind: kind.to_owned(),
                        source,
                    }
                })?;
            Ok(cnao::validate_network_addons_config(&config)?)
        }
        (kubevirt::GROUP, "VirtualMachineInstanceReplicaSet") => {
            let rs = parse(object, kind)?;
            Ok(crate::kubevirt::replicas::validate_replica_set(&rs)?)
        }
        (api::pool::GROUP, "VirtualMachinePool") => {
            let pool = parse(object, kind)?;
            Ok(crate::kubevirt::replicas::validate_pool(&pool, None)?)
        }
        (kubevirt::GROUP, "VirtualMachineInstance") => {
            rewrite(object, kind, |vmi: &mut VirtualMachineInstance| {
                kubevirt::default::default_instance_spec(&mut vmi.spec, cluster);
                crate::kubevirt::validate::validate_virtual_machine_instance(vmi)
            })
        }
        _ => Ok(()),
    }
}

/// `object` as a `T`, for validation only (the object is stored as sent).
fn parse<T: DeserializeOwned>(object: &Value, kind: &str) -> Result<T, AdmissionError> {
    serde_json::from_value(object.clone()).map_err(|source| AdmissionError::Malformed {
        kind: kind.to_owned(),
        source,
    })
}

/// Parses `object` as `T`, runs `apply` (defaulting, then validation), and writes the
/// defaulted object back.
fn rewrite<T: DeserializeOwned + Serialize>(
    object: &mut Value,
    kind: &str,
    apply: impl FnOnce(&mut T) -> Result<(), ValidationError>,
) -> Result<(), AdmissionError> {
    let malformed = |source| AdmissionError::Malformed {
        kind: kind.to_owned(),
        source,
    };
    let mut typed: T = serde_json::from_value(object.clone()).map_err(malformed)?;
    apply(&mut typed)?;
    *object = serde_json::to_value(&typed).map_err(malformed)?;
    tracing::debug!(kind, "admitted");
    Ok(())
}

/// Reports a `contentType` outside the enum against its field instead of as a parse error.
fn check_content_type(
    object: &Value,
    pointer: &str,
    spec: &FieldPath,
) -> Result<(), ValidationError> {
    let Some(value) = object.pointer(pointer) else {
        return Ok(());
    };
    let known = [
        DataVolumeContentType::KubeVirt,
        DataVolumeContentType::Archive,
    ];
    if known.iter().any(|k| value.as_str() == Some(k.as_str())) {
        return Ok(());
    }
    Err(ValidationError::new(
        spec.child("contentType"),
        Problem::Unsupported {
            value: value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned),
            supported: join(&["kubevirt", "archive"]),
        },
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn dv() -> Value {
        json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1",
            "kind": "DataVolume",
            "metadata": {"name": "d", "namespace": "n", "labels": {"a": "b"}},
            "spec": {
                "source": {"upload": {}},
                "storage": {"resources": {"requests": {"storage": "1Gi"}}}
            }
        })
    }

    #[test]
    fn data_volumes_are_defaulted_in_place() {
        let mut v = dv();
        admit(&mut v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v["spec"]["contentType"], json!("kubevirt"));
        assert_eq!(v["metadata"]["labels"]["a"], json!("b"));
    }

    #[test]
    fn invalid_data_volumes_are_refused_naming_the_field() {
        let mut v = dv();
        v["spec"]["storage"]["resources"]["requests"]["storage"] = json!("1Ki");
        let e = admit(&mut v).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("spec.storage.resources.requests.storage:"),
            "{e}"
        );
        let mut v = dv();
        v["spec"]["contentType"] = json!("iso");
        let e = admit(&mut v).unwrap_err();
        assert!(e.to_string().starts_with("spec.contentType:"), "{e}");
    }

    #[test]
    fn virtual_machines_get_a_run_strategy() {
        let mut v = json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": "vm"},
            "spec": {"template": {"spec": {"domain": {"devices": {}}}}}
        });
        admit(&mut v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v["spec"]["runStrategy"], json!("Halted"));
        v["spec"]["running"] = json!(true);
        assert!(
            admit(&mut v)
                .unwrap_err()
                .to_string()
                .starts_with("spec.running:")
        );
    }

    #[test]
    fn instances_get_the_pod_network_and_a_disk_per_volume() {
        let mut v = json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "vmi"},
            "spec": {"domain": {"devices": {}},
                     "volumes": [{"name": "root", "dataVolume": {"name": "dv"}}]}
        });
        admit(&mut v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            v["spec"]["networks"],
            json!([{"name": "default", "pod": {}}])
        );
        assert_eq!(
            v["spec"]["domain"]["devices"]["interfaces"],
            json!([{"name": "default", "masquerade": {}}])
        );
        assert_eq!(
            v["spec"]["domain"]["devices"]["disks"][0]["name"],
            json!("root")
        );
    }

    #[test]
    fn malformed_objects_are_refused() {
        let mut v = dv();
        v["spec"]["storage"] = json!("big");
        assert!(matches!(
            admit(&mut v).unwrap_err(),
            AdmissionError::Malformed { .. }
        ));
    }

    #[test]
    fn network_addons_configs_are_refused_naming_the_range_field() {
        let mut nac = json!({
            "apiVersion": "networkaddonsoperator.network.kubevirt.io/v1",
            "kind": "NetworkAddonsConfig",
            "metadata": {"name": "cluster"},
            "spec": {"kubeMacPool": {"rangeStart": "03:00:00:00:00:00", "rangeEnd": "03:00:00:00:00:ff"}},
        });
        let err = admit(&mut nac).unwrap_err().to_string();
        assert!(err.starts_with("spec.kubeMacPool.rangeStart: "), "{err}");
        assert!(
            err.contains("Multicast addressing is not supported"),
            "{err}"
        );
        nac["spec"]["kubeMacPool"] =
            json!({"rangeStart": "02:00:00:00:00:00", "rangeEnd": "02:00:00:00:00:ff"});
        let before = nac.clone();
        admit(&mut nac).expect("a valid range");
        assert_eq!(nac, before);
    }

    #[test]
    fn other_kinds_pass_unchanged() {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "y"}});
        let before = v.clone();
        assert!(admit(&mut v).is_ok());
        assert_eq!(v, before);
    }
}
