//! `processedtemplates` answered by the embedded API server, as OpenShift's API server answers
//! it: a create of `template.openshift.io/v1` `processedtemplates` with a Template body is not
//! stored; it is answered with the Template processed (parameters generated, objects
//! substituted and labelled), or refused as Invalid with OpenShift's field errors.
//!
//! The embedded server serves a resource only when it knows its type; [`serve_resource`]
//! declares `processedtemplates` with a CustomResourceDefinition on the embedded server (never
//! on a cluster: OpenShift serves it natively).

use anyhow::Context;
use api::template::generator::OsRandomness;
use api::template::{API_VERSION, GROUP, KIND, PROCESSED_PLURAL, Template};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use standalone::apiserver::{ApiError, VirtualCreate};

/// The kind as Kubernetes names it in errors: `Template.template.openshift.io`.
const QUALIFIED_KIND: &str = "Template.template.openshift.io";

/// The `virtual_creates` entry of the API server that processes templates.
pub fn processed_templates() -> ((String, String), Box<VirtualCreate>) {
    let create = |namespace: &str, body: Value| answer(namespace, body);
    ((GROUP.into(), PROCESSED_PLURAL.into()), Box::new(create))
}

/// Processes the Template in `body` for `namespace`.
pub fn answer(namespace: &str, mut body: Value) -> Result<Value, ApiError> {
    check_type(&mut body)?;
    let mut template: Template = serde_json::from_value(body)
        .map_err(|err| ApiError::BadRequest(format!("the body is not a Template: {err}")))?;
    if let Some(given) = template.metadata.namespace.as_deref()
        && !given.is_empty()
        && !namespace.is_empty()
        && given != namespace
    {
        return Err(ApiError::BadRequest(format!(
            "the namespace of the provided object ({given}) does not match the namespace sent on the request ({namespace})"
        )));
    }
    let name = template.metadata.name.clone().unwrap_or_default();
    api::template::process::process(&mut template, &mut OsRandomness).map_err(|errors| {
        ApiError::Invalid {
            kind: QUALIFIED_KIND.into(),
            name: name.clone(),
            message: errors.to_string(),
        }
    })?;
    tracing::info!(%namespace, template = %name, objects = template.objects.len(), "processed a template");
    serde_json::to_value(&template).map_err(ApiError::internal)
}

/// Fills in `kind` and `apiVersion` when missing; refuses other types.
fn check_type(body: &mut Value) -> Result<(), ApiError> {
    let Some(object) = body.as_object_mut() else {
        return Err(ApiError::BadRequest(format!(
            "the body of a {PROCESSED_PLURAL} request must be a {KIND} object"
        )));
    };
    for (field, expected) in [("kind", KIND), ("apiVersion", API_VERSION)] {
        match object.get(field) {
            None | Some(Value::Null) => {
                object.insert(field.into(), expected.into());
            }
            Some(Value::String(given)) if given == expected => {}
            Some(given) => {
                return Err(ApiError::BadRequest(format!(
                    "{field} {given} does not match the expected {expected:?} of {PROCESSED_PLURAL}"
                )));
            }
        }
    }
    Ok(())
}

/// Declares `processedtemplates` on the embedded API server so that it is discovered and
/// its creates reach [`processed_templates`].
pub async fn serve_resource(client: &kube::Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{PROCESSED_PLURAL}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "plural": PROCESSED_PLURAL, "singular": "processedtemplate"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .context("building the processedtemplates definition")?;
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err).context("declaring processedtemplates on the API server"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(parameters: Value) -> Value {
        json!({
            "apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": "t", "namespace": "ns"},
            "objects": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "${NAME}", "namespace": "elsewhere"}}],
            "parameters": parameters,
            "labels": {"app": "${NAME}"},
        })
    }

    #[test]
    fn answers_with_the_processed_template() {
        let ((group, plural), create) = processed_templates();
        assert_eq!((group.as_str(), plural.as_str()), (GROUP, PROCESSED_PLURAL));
        let out = create("ns", template(json!([{"name": "NAME", "value": "cm"}]))).unwrap();
        assert_eq!(out["kind"], KIND);
        let object = &out["objects"][0];
        assert_eq!(object["metadata"]["name"], "cm");
        assert_eq!(object["metadata"]["labels"]["app"], "cm");
        assert!(object["metadata"].get("namespace").is_none());
    }

    #[test]
    fn a_missing_required_parameter_is_invalid_with_openshifts_message() {
        let body = template(json!([{"name": "NAME", "required": true}]));
        let err = answer("ns", body).unwrap_err();
        assert_eq!(err.code(), 422);
        assert_eq!(
            err.to_string(),
            "Template.template.openshift.io \"t\" is invalid: template.parameters[0]: Required value: template.parameters[0]: parameter NAME is required and must be specified"
        );
    }

    #[test]
    fn other_types_and_namespaces_are_refused() {
        let mut body = template(json!([]));
        body["kind"] = json!("ConfigMap");
        assert_eq!(answer("ns", body).unwrap_err().code(), 400);
        let body = template(json!([]));
        let err = answer("other", body).unwrap_err();
        assert!(err.to_string().contains("namespace"), "{err}");
        assert_eq!(answer("ns", json!([1])).unwrap_err().code(), 400);
        let err = answer("ns", json!({"objects": "no"})).unwrap_err();
        assert!(err.to_string().contains("not a Template"), "{err}");
    }
}
