//! The scale subresource of a custom resource, as kube-apiserver serves it: an
//! `autoscaling/v1` Scale read from the paths the CRD's `subresources.scale` names
//! (`specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`), and a write of
//! `spec.replicas` back to the object. `kubectl scale` and a HorizontalPodAutoscaler use it.

use serde_json::{Value, json};

use super::errors::ApiError;

/// Where a custom resource keeps what its Scale shows.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalePaths {
    /// `.spec.replicas`, as the CRD writes it.
    pub spec_replicas: String,
    /// `.status.replicas`.
    pub status_replicas: String,
    /// `.status.labelSelector`, when the CRD names one.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// The paths of a CRD version's `subresources.scale`.
    pub fn of_crd(scale: &Value) -> Option<Self> {
        Some(Self {
            spec_replicas: scale.get("specReplicasPath")?.as_str()?.to_string(),
            status_replicas: scale.get("statusReplicasPath")?.as_str()?.to_string(),
            label_selector: scale
                .get("labelSelectorPath")
                .and_then(Value::as_str)
                .map(String::from),
        })
    }
}

/// `.spec.replicas` as a JSON pointer, `/spec/replicas`.
pub fn pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |mut out, step| {
            out.push('/');
            out.push_str(&step.replace('~', "~0").replace('/', "~1"));
            out
        })
}

fn at<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    object.pointer(&pointer(path))
}

/// The Scale of `object`: its replicas (0 where the path is missing, as kube-apiserver),
/// the replicas its status reports and its selector.
pub fn scale_of(object: &Value, paths: &ScalePaths) -> Value {
    let meta = &object["metadata"];
    let mut metadata = json!({});
    for key in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(value) = meta.get(key) {
            metadata[key] = value.clone();
        }
    }
    let replicas = |path: &str| at(object, path).and_then(Value::as_i64).unwrap_or(0);
    let selector = paths
        .label_selector
        .as_deref()
        .and_then(|p| at(object, p))
        .and_then(Value::as_str)
        .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": replicas(&paths.spec_replicas)},
        "status": {"replicas": replicas(&paths.status_replicas), "selector": selector},
    })
}

/// The replicas a Scale written by a client asks for, refused as kube-apiserver refuses a
/// negative or missing count.
pub fn wanted_replicas(scale: &Value, name: &str) -> Result<i64, ApiError> {
    let invalid = |message: String| ApiError::Invalid {
        kind: "Scale".into(),
        name: name.to_string(),
        message,
    };
    match &scale["spec"]["replicas"] {
        Value::Null => Ok(0),
        value => {
            let replicas = value
                .as_i64()
                .filter(|n| i32::try_from(*n).is_ok())
                .ok_or_else(|| {
                    invalid(format!(
                        "spec.replicas: Invalid value: {value}: must be a 32-bit integer"
                    ))
                })?;
            if replicas < 0 {
                return Err(invalid(format!(
                    "spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
                )));
            }
            Ok(replicas)
        }
    }
}

/// The JSON patch writing `replicas` to the object at `spec_replicas`, only onto the
/// version `resource_version` the Scale was derived from.
pub fn replicas_patch(paths: &ScalePaths, resource_version: &Value, replicas: i64) -> Value {
    json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "add", "path": pointer(&paths.spec_replicas), "value": replicas},
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> ScalePaths {
        ScalePaths::of_crd(&json!({"specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.labelSelector"}))
        .expect("scale paths")
    }

    #[test]
    fn a_scale_shows_the_objects_replicas_and_selector() {
        let pool = json!({"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7", "labels": {"a": "b"}},
            "spec": {"replicas": 3}, "status": {"replicas": 2, "labelSelector": "app=web"}});
        let scale = scale_of(&pool, &paths());
        assert_eq!(scale["spec"]["replicas"], 3);
        assert_eq!(
            scale["status"],
            json!({"replicas": 2, "selector": "app=web"})
        );
        assert_eq!(
            scale["metadata"],
            json!({"name": "p", "namespace": "ns", "resourceVersion": "7"})
        );
        let bare = scale_of(&json!({"metadata": {"name": "q"}, "spec": {}}), &paths());
        assert_eq!(
            (
                bare["spec"]["replicas"].clone(),
                bare["status"]["selector"].clone()
            ),
            (json!(0), json!(""))
        );
    }

    #[test]
    fn a_negative_count_is_refused_and_a_write_targets_the_spec_path() {
        assert!(wanted_replicas(&json!({"spec": {"replicas": -1}}), "p").is_err());
        assert_eq!(
            wanted_replicas(&json!({"spec": {"replicas": 5}}), "p").ok(),
            Some(5)
        );
        let patch = replicas_patch(&paths(), &json!("7"), 5);
        assert_eq!(
            patch[1],
            json!({"op": "add", "path": "/spec/replicas", "value": 5})
        );
    }
}
