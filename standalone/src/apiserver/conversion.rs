//! Custom resources served at more than one version, as apiextensions-apiserver serves
//! them: an object is stored once, at the CRD's storage version, and read, written, patched
//! and watched at whichever served version the request names.
//!
//! A CRD's `spec.conversion.strategy` says how an object moves between versions: `None`
//! changes only its `apiVersion`; `Webhook` asks the conversion webhook. This server calls no
//! webhook service: a component that converts registers an in-process [`super::converter::Converter`] for its
//! kind, as it registers its validating webhooks, and a CRD asking for a webhook without one
//! fails the request as kube-apiserver fails it when the webhook cannot be reached.
//!
//! Either way the result is pruned by the schema of the version it is now at, as
//! kube-apiserver prunes what a conversion gives: a field only one version declares does
//! not cross to the other (upstream's SSP v1beta2 and v1beta3, strategy `None`).

use serde_json::{Value, json};

use super::converter::Strategy;
use super::crd_schema::Input;
use super::errors::ApiError;
use super::resources::ResourceType;

/// `object` at `version` of `rt`, pruned by that version's schema.
pub fn to_version(rt: &ResourceType, object: Value, version: &str) -> Result<Value, ApiError> {
    let api_version = rt.api_version(version);
    if !object.is_object() || object["apiVersion"] == api_version.as_str() {
        return Ok(object);
    }
    let mut converted = converted(rt, object, &api_version)?;
    if let Some(schemas) = &rt.schemas {
        schemas.prune(version, &mut converted, Input::Object);
    }
    Ok(converted)
}

/// `object` converted to `api_version` as `rt`'s strategy says.
fn converted(rt: &ResourceType, object: Value, api_version: &str) -> Result<Value, ApiError> {
    match &rt.conversion {
        Strategy::None => Ok(relabelled(object, api_version)),
        Strategy::Webhook(_) if object["apiVersion"].is_null() => {
            Ok(relabelled(object, api_version))
        }
        Strategy::Webhook(converter) => {
            let failed = |reason: String| {
                ApiError::Internal(format!(
                    "conversion webhook for {}, Kind={} failed: {reason}",
                    object["apiVersion"].as_str().unwrap_or_default(),
                    rt.kind
                ))
            };
            let Some(converter) = converter else {
                return Err(failed(
                    "no converter is registered for this kind (this API server calls no conversion webhook service)".into(),
                ));
            };
            let converted = (converter.convert)(&object, api_version).map_err(failed)?;
            if converted["apiVersion"] != api_version {
                return Err(failed(format!(
                    "the webhook returned {} instead of {api_version}",
                    converted["apiVersion"]
                )));
            }
            Ok(converted)
        }
    }
}

fn relabelled(mut object: Value, api_version: &str) -> Value {
    object["apiVersion"] = json!(api_version);
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::converter::Converter;
    use crate::apiserver::resources::from_crd;

    fn widgets(strategy: &str) -> ResourceType {
        from_crd(
            &json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "conversion": {"strategy": strategy},
            "versions": [{"name": "v2", "served": true, "storage": true},
                         {"name": "v1", "served": true, "storage": false}]}}),
        )
        .expect("a CRD")
    }

    /// v1's `size` is v2's `spec.size`.
    fn sizes(object: &Value, to: &str) -> Result<Value, String> {
        let mut out = object.clone();
        match to {
            "example.com/v2" => {
                let size = out.as_object_mut().and_then(|o| o.remove("size"));
                out["spec"]["size"] = size.ok_or("v1 object without size")?;
            }
            _ => {
                out["size"] = out["spec"]["size"].take();
                out.as_object_mut().map(|o| o.remove("spec"));
            }
        }
        out["apiVersion"] = json!(to);
        Ok(out)
    }

    #[test]
    fn strategy_none_changes_only_the_api_version() {
        let rt = widgets("None");
        let v1 = json!({"apiVersion": "example.com/v1", "kind": "Widget", "size": 3});
        let v2 = to_version(&rt, v1, "v2").unwrap();
        assert_eq!(
            v2,
            json!({"apiVersion": "example.com/v2", "kind": "Widget", "size": 3})
        );
    }

    #[test]
    fn a_webhook_strategy_uses_the_registered_converter_both_ways() {
        let mut rt = widgets("Webhook");
        rt.conversion = Strategy::Webhook(Some(Converter::new("example.com", "Widget", sizes)));
        let v1 = json!({"apiVersion": "example.com/v1", "kind": "Widget", "size": 3});
        let stored = to_version(&rt, v1.clone(), "v2").unwrap();
        assert_eq!(stored["spec"]["size"], 3);
        assert_eq!(to_version(&rt, stored.clone(), "v1").unwrap(), v1);
        assert_eq!(
            to_version(&rt, stored.clone(), "v2").unwrap(),
            stored,
            "same version, no call"
        );
        let bad = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
        let err = to_version(&rt, bad, "v2").unwrap_err().to_string();
        assert!(
            err.contains(
                "conversion webhook for example.com/v1, Kind=Widget failed: v1 object without size"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_conversion_keeps_only_what_the_target_version_declares() {
        let object = |props: Value| json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}});
        let rt = from_crd(&json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "conversion": {"strategy": "None"},
            "versions": [
                {"name": "v2", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": object(json!({"size": {"type": "integer"}, "color": {"type": "string"}}))}},
                {"name": "v1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": object(json!({"size": {"type": "integer"}, "legacy": {"type": "boolean"}}))}}]}}))
        .expect("a CRD");
        let v1 = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                        "spec": {"size": 3, "legacy": true}});
        let v2 = to_version(&rt, v1, "v2").unwrap();
        assert_eq!(
            v2["spec"],
            json!({"size": 3}),
            "v1's legacy does not reach v2"
        );
        let mut v2 = v2;
        v2["spec"]["color"] = json!("red");
        let v1 = to_version(&rt, v2, "v1").unwrap();
        assert_eq!(v1["apiVersion"], "example.com/v1");
        assert_eq!(
            v1["spec"],
            json!({"size": 3}),
            "v2's color does not reach v1"
        );
    }

    #[test]
    fn a_webhook_strategy_without_a_converter_fails_the_request() {
        let rt = widgets("Webhook");
        let v1 = json!({"apiVersion": "example.com/v1", "kind": "Widget", "size": 3});
        let err = to_version(&rt, v1, "v2").unwrap_err().to_string();
        assert!(err.contains("no converter is registered"), "{err}");
    }
}
