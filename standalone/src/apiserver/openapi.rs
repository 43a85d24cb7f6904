//! OpenAPI v3: the index and the per-group/version documents. kubectl reads them to learn
//! that the server validates fields itself (so it sends `fieldValidation` instead of checking
//! objects against schemas), and `kubectl explain` prints the schemas' descriptions.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use k8s_openapi::api::admissionregistration;
use k8s_openapi::api::{apps, batch, coordination, core, events, rbac, scheduling, storage};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::crd_schema::{Input, prune_with_refs};
use super::discovery;
use super::resources::ResourceType;

/// `/openapi/v3`: one document per group/version.
pub fn openapi_v3_index(types: &[ResourceType]) -> Value {
    let mut paths = serde_json::Map::new();
    paths.insert(
        "api/v1".into(),
        json!({"serverRelativeURL": "/openapi/v3/api/v1"}),
    );
    for (group, versions) in discovery::groups(types) {
        for version in versions {
            let path = format!("apis/{group}/{version}");
            paths.insert(
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}")}),
            );
        }
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`: the operations of each
/// resource, each PATCH declaring the `fieldValidation` parameter and its kind, which is
/// what kubectl checks before it leaves validation to the server. A custom resource's schema
/// is its CRD's (`schema_of`), descriptions included, which is what `kubectl explain` prints;
/// the built-in types' schemas are open (`x-kubernetes-preserve-unknown-fields`).
pub fn openapi_v3_document(
    types: &[ResourceType],
    group: &str,
    version: &str,
    schema_of: impl Fn(&ResourceType) -> Option<Value>,
) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    let prefix = if group.is_empty() {
        "/api/v1".to_string()
    } else {
        format!("/apis/{group}/{version}")
    };
    for rt in types.iter().filter(|rt| {
        rt.group == group && rt.versions.iter().any(|v| v == version) && !rt.create_only
    }) {
        let gvk = json!({"group": group, "version": version, "kind": rt.kind});
        let schema_name = format!(
            "{}.{version}.{}",
            if group.is_empty() {
                "io.k8s.api.core"
            } else {
                group
            },
            rt.kind
        );
        let mut schema = match schema_of(rt) {
            Some(custom) => with_object_fields(custom, &mut schemas),
            None => builtin_schema(rt, version, &mut schemas).unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            ),
        };
        schema["x-kubernetes-group-version-kind"] = json!([gvk]);
        schemas.insert(schema_name.clone(), schema);
        let reference = json!({"$ref": format!("#/components/schemas/{schema_name}")});
        let operation = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", rt.kind),
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                ],
                "responses": {"200": {"content": {"application/json": {"schema": reference}}}},
            })
        };
        let item = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", rt.plural)
        } else {
            format!("{prefix}/{}/{{name}}", rt.plural)
        };
        paths.insert(
            item,
            json!({"get": operation("get"), "put": operation("put"), "patch": operation("patch"), "delete": operation("delete")}),
        );
        let collection = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{prefix}/{}", rt.plural)
        };
        paths.insert(
            collection,
            json!({"post": operation("post"), "get": operation("list")}),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": discovery::version()["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// A custom resource's schema with `apiVersion`, `kind` and `metadata` as every object
/// has them (taken from a built-in kind's published schema, ObjectMeta's among the
/// referenced ones added to `schemas`), as kube-apiserver publishes a CRD's: a CRD's own
/// schema rarely declares them, and kubectl's client-side validation (of a `kind: List`,
/// for one) refuses fields the schema does not name.
fn with_object_fields(mut custom: Value, schemas: &mut Map<String, Value>) -> Value {
    static OBJECT: OnceLock<Option<BuiltinSchema>> = OnceLock::new();
    let Some(object) = OBJECT.get_or_init(|| generate_builtin("", "ConfigMap")) else {
        return custom;
    };
    let Some(properties) = custom
        .as_object_mut()
        .map(|c| c.entry("properties").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
    else {
        return custom;
    };
    for field in ["apiVersion", "kind", "metadata"] {
        let Some(common) = object.root["properties"].get(field) else {
            continue;
        };
        // kube-apiserver publishes its own for all three, whatever the CRD's schema says.
        properties.insert(field.to_owned(), common.clone());
    }
    schemas.extend(object.referenced.clone());
    custom
}

/// A built-in kind's schema and the schemas it refers to.
struct BuiltinSchema {
    root: Value,
    referenced: Map<String, Value>,
}

/// The schema of a built-in kind, as Kubernetes publishes it; the types it refers to are
/// added to `schemas` (the document's `components.schemas`), where its `$ref`s point. Each
/// kind's is generated once: kubectl fetches these documents on every `apply`.
fn builtin_schema(
    rt: &ResourceType,
    version: &str,
    schemas: &mut Map<String, Value>,
) -> Option<Value> {
    let found = cached_builtin(rt, version)?;
    schemas.extend(found.referenced.iter().map(|(k, v)| (k.clone(), v.clone())));
    Some(found.root.clone())
}

/// The generated schema of a built-in kind, each made once and kept.
fn cached_builtin(rt: &ResourceType, version: &str) -> Option<std::sync::Arc<BuiltinSchema>> {
    type Cache = Mutex<HashMap<(String, String), Option<std::sync::Arc<BuiltinSchema>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    if version != "v1" || rt.schemas.is_some() {
        return None;
    }
    let key = (rt.group.clone(), rt.kind.clone());
    CACHE
        .get_or_init(Cache::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(key)
        .or_insert_with(|| generate_builtin(&rt.group, &rt.kind).map(std::sync::Arc::new))
        .clone()
}

/// Drops from a built-in kind's `value` what its schema does not have, as kube-apiserver's
/// decoding into its Go types drops it; returns the paths dropped (none for a kind without
/// a published schema: the snapshot kinds), or for an object with a value of the wrong
/// type, the decoding's error.
pub fn prune_builtin(
    rt: &ResourceType,
    version: &str,
    value: &mut Value,
    input: Input,
) -> Result<Vec<String>, String> {
    match cached_builtin(rt, version) {
        Some(found) => prune_with_refs(&found.root, &found.referenced, value, input),
        None => Ok(Vec::new()),
    }
}

fn generate_builtin(group: &str, kind: &str) -> Option<BuiltinSchema> {
    let root = match (group, kind) {
        ("", "Namespace") => root_schema::<core::v1::Namespace>(),
        ("", "Pod") => root_schema::<core::v1::Pod>(),
        ("", "PersistentVolumeClaim") => root_schema::<core::v1::PersistentVolumeClaim>(),
        ("", "PersistentVolume") => root_schema::<core::v1::PersistentVolume>(),
        ("", "Secret") => root_schema::<core::v1::Secret>(),
        ("", "ConfigMap") => root_schema::<core::v1::ConfigMap>(),
        ("", "Service") => root_schema::<core::v1::Service>(),
        ("", "Endpoints") => root_schema::<core::v1::Endpoints>(),
        ("", "Event") => root_schema::<core::v1::Event>(),
        ("", "Node") => root_schema::<core::v1::Node>(),
        ("", "ServiceAccount") => root_schema::<core::v1::ServiceAccount>(),
        ("events.k8s.io", "Event") => root_schema::<events::v1::Event>(),
        ("storage.k8s.io", "StorageClass") => root_schema::<storage::v1::StorageClass>(),
        ("storage.k8s.io", "CSIDriver") => root_schema::<storage::v1::CSIDriver>(),
        ("storage.k8s.io", "CSINode") => root_schema::<storage::v1::CSINode>(),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            root_schema::<apiextensions::v1::CustomResourceDefinition>()
        }
        ("apps", "Deployment") => root_schema::<apps::v1::Deployment>(),
        ("apps", "DaemonSet") => root_schema::<apps::v1::DaemonSet>(),
        ("apps", "ControllerRevision") => root_schema::<apps::v1::ControllerRevision>(),
        ("batch", "Job") => root_schema::<batch::v1::Job>(),
        ("coordination.k8s.io", "Lease") => root_schema::<coordination::v1::Lease>(),
        ("scheduling.k8s.io", "PriorityClass") => root_schema::<scheduling::v1::PriorityClass>(),
        ("rbac.authorization.k8s.io", "Role") => root_schema::<rbac::v1::Role>(),
        ("rbac.authorization.k8s.io", "RoleBinding") => root_schema::<rbac::v1::RoleBinding>(),
        ("rbac.authorization.k8s.io", "ClusterRole") => root_schema::<rbac::v1::ClusterRole>(),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            root_schema::<rbac::v1::ClusterRoleBinding>()
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            root_schema::<admissionregistration::v1::ValidatingWebhookConfiguration>()
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            root_schema::<admissionregistration::v1::MutatingWebhookConfiguration>()
        }
        ("apiregistration.k8s.io", "APIService") => {
            root_schema::<apiregistration::v1::APIService>()
        }
        _ => return None,
    };
    let Value::Object(mut root) = root else {
        return None;
    };
    let referenced = match root
        .remove("components")
        .and_then(|mut c| c.get_mut("schemas").map(Value::take))
    {
        Some(Value::Object(referenced)) => referenced,
        _ => Map::new(),
    };
    root.remove("$schema");
    Some(BuiltinSchema {
        root: Value::Object(root),
        referenced,
    })
}

/// `T`'s schema in OpenAPI 3's dialect, its references under `components.schemas`.
fn root_schema<T: JsonSchema>() -> Value {
    SchemaSettings::openapi3()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value()
}
