//! The writing verbs: create, update, patch and delete, with field validation; the writes
//! go through admission (`Objects`), made as the requesting user.

use std::collections::HashMap;

use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::http::{json_response, parse_json};
use super::{Body, Call, Handler};
use crate::apiserver::admission::Write;
use crate::apiserver::crd_schema::Input;
use crate::apiserver::errors::ApiError;
use crate::apiserver::managed_fields;
use crate::apiserver::object::UpdateTarget;
use crate::apiserver::objects::Propagation;
use crate::apiserver::patch::{self, PatchType};
use crate::apiserver::query::{dry_run, persist_of};
use crate::apiserver::resources::ResourceType;
use crate::apiserver::scale;
use crate::apiserver::store::Persist;

impl Handler {
    /// A create (POST to a collection): field validation, then the write through
    /// admission.
    pub(super) fn create(
        &self,
        rt: &ResourceType,
        call: &Call,
        persist: Persist,
    ) -> Result<Response<Body>, ApiError> {
        let (version, ns) = version_and_namespace(call);
        let body = parse_json(&call.body)?;
        let mut warnings = Self::check_fields(rt, version, call, &body)?;
        let write = Write::by(&call.user, persist);
        let created = self.objects.create_as(write, rt, version, ns, body)?;
        warnings.extend(created.warnings);
        self.respond(rt, call, StatusCode::CREATED, created.object, warnings)
    }

    /// An update (PUT) of an object or its status.
    pub(super) fn update(
        &self,
        rt: &ResourceType,
        call: &Call,
        name: &str,
        persist: Persist,
    ) -> Result<Response<Body>, ApiError> {
        let (version, ns) = version_and_namespace(call);
        let body = parse_json(&call.body)?;
        let mut warnings = Self::check_fields(rt, version, call, &body)?;
        let (write, target) = (Write::by(&call.user, persist), update_target(call));
        let updated = (self.objects).update_as(write, rt, version, ns, name, body, target)?;
        warnings.extend(updated.warnings);
        self.respond(rt, call, StatusCode::OK, updated.object, warnings)
    }

    /// A patch of any of the four types; a server-side apply may create the object.
    pub(super) fn patch(
        &self,
        rt: &ResourceType,
        call: &Call,
        name: &str,
        persist: Persist,
    ) -> Result<Response<Body>, ApiError> {
        let (version, ns) = version_and_namespace(call);
        let objects = &self.objects;
        let mut warnings = Vec::new();
        let kind = PatchType::from_content_type(&call.content_type)?;
        let manager = call.query.get("fieldManager").cloned();
        if kind == PatchType::Apply {
            managed_fields::check_manager(manager.as_deref()).map_err(ApiError::BadRequest)?;
        }
        let patch = patch::Patch {
            kind,
            body: patch::parse_body(kind, &call.body)?,
            manager,
        };
        // A merge-style patch has the object's shape; a JSON patch does not.
        if kind != PatchType::Json {
            warnings = Self::check_fields(rt, version, call, &patch.body)?;
        }
        let existed =
            kind == PatchType::Apply && objects.store.get(&rt.storage_key(), ns, name)?.is_some();
        let (write, target) = (Write::by(&call.user, persist), update_target(call));
        let patched = objects.patch_as(write, rt, version, ns, name, &patch, target)?;
        warnings.extend(patched.warnings);
        let status = if kind == PatchType::Apply && !existed {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        self.respond(rt, call, status, patched.object, warnings)
    }

    /// A delete of one object, with its DeleteOptions.
    pub(super) fn delete(
        &self,
        rt: &ResourceType,
        call: &Call,
        name: &str,
    ) -> Result<Response<Body>, ApiError> {
        let (version, ns) = version_and_namespace(call);
        let (propagation, uid, persist) = delete_options(&call.query, &call.body)?;
        let options = (propagation, uid.as_deref());
        let write = Write::by(&call.user, persist);
        let deleted = (self.objects).delete_as(write, rt, version, ns, name, options)?;
        self.respond(rt, call, StatusCode::OK, deleted.object, deleted.warnings)
    }

    /// The fields of a request body that its kind's schema (a custom resource's CRD's, a
    /// built-in kind's published one) does not declare, which the write will prune: with
    /// `fieldValidation=Strict` (kubectl's default) a refusal naming them, as the API
    /// server's strict decoding; with `Ignore` nothing; else (`Warn`, the default) a
    /// warning for each.
    pub(super) fn check_fields(
        rt: &ResourceType,
        version: &str,
        call: &Call,
        body: &Value,
    ) -> Result<Vec<String>, ApiError> {
        let mode = call.query.get("fieldValidation").map(String::as_str);
        if mode == Some("Ignore") {
            return Ok(Vec::new());
        }
        let unknown = match &rt.schemas {
            Some(schemas) => schemas.prune(version, &mut body.clone(), Input::Body),
            // A body's types are judged once it is the object it makes.
            None => crate::apiserver::openapi::prune_builtin(
                rt,
                version,
                &mut body.clone(),
                Input::Body,
            )
            .unwrap_or_default(),
        };
        let named: Vec<String> = unknown
            .iter()
            .map(|field| format!("unknown field \"{field}\""))
            .collect();
        if mode != Some("Strict") || named.is_empty() {
            return Ok(named);
        }
        Err(ApiError::BadRequest(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
            named.join(", "),
            kind = rt.kind
        )))
    }

    pub(super) fn delete_collection(
        &self,
        rt: &ResourceType,
        call: &Call,
    ) -> Result<Response<Body>, ApiError> {
        let options = Self::list_options(rt, &call.query)?;
        let (propagation, _, persist) = delete_options(&call.query, &call.body)?;
        let page = self
            .objects
            .list(rt, call.path.namespace.as_deref(), &options)?;
        let mut deleted = Vec::new();
        for item in page.items {
            let ns = item["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let name = crate::apiserver::object::name(&item).to_string();
            let version = &call.path.version;
            let write = Write::by(&call.user, persist);
            let options = (propagation, None);
            match (self.objects).delete_as(write, rt, version, &ns, &name, options) {
                Ok(outcome) => deleted.push(outcome.object),
                Err(ApiError::NotFound { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        let body = json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(&call.path.version),
            "metadata": {},
            "items": deleted,
        });
        Ok(json_response(StatusCode::OK, &body))
    }
}

/// propagationPolicy (query or DeleteOptions body) and a uid precondition.
/// A delete's options from its query and its DeleteOptions body: the propagation, the
/// precondition UID, and whether it is a dry run (kubectl puts `dryRun` in the body).
fn delete_options(
    query: &HashMap<String, String>,
    body: &[u8],
) -> Result<(Propagation, Option<String>, Persist), ApiError> {
    let options: Value = if body.is_empty() {
        Value::Null
    } else {
        parse_json(body)?
    };
    let mut policy = options["propagationPolicy"]
        .as_str()
        .unwrap_or("")
        .to_string();
    if let Some(q) = query.get("propagationPolicy") {
        policy = q.clone();
    }
    if policy.is_empty() && options["orphanDependents"].as_bool() == Some(true) {
        policy = "Orphan".into();
    }
    let uid = options["preconditions"]["uid"].as_str().map(String::from);
    let mut persist = persist_of(query)?;
    let malformed = || ApiError::BadRequest("dryRun: must be a list of strings".into());
    let values = match &options["dryRun"] {
        Value::Null => &Vec::new(),
        Value::Array(values) => values,
        _ => return Err(malformed()),
    };
    for value in values {
        if dry_run(value.as_str().ok_or_else(malformed)?)? == Persist::DryRun {
            persist = Persist::DryRun;
        }
    }
    Ok((Propagation::parse(&policy)?, uid, persist))
}

/// The version a request names and its namespace (empty for a cluster-scoped resource).
fn version_and_namespace(call: &Call) -> (&str, &str) {
    let path = &call.path;
    (
        path.version.as_str(),
        path.namespace.as_deref().unwrap_or(""),
    )
}

/// Whether a write is to an object or to its status subresource.
fn update_target(call: &Call) -> UpdateTarget {
    if call.path.subresource.as_deref() == Some("status") {
        UpdateTarget::Status
    } else {
        UpdateTarget::Main
    }
}

impl Handler {
    /// The scale subresource: GET reads the object's Scale; PUT and PATCH write the Scale's
    /// `spec.replicas` to the object (through admission, as an update of the object), refused
    /// with a conflict when the Scale names another resourceVersion.
    pub(super) fn scale(
        &self,
        rt: &ResourceType,
        call: &Call,
        persist: Persist,
    ) -> Result<Response<Body>, ApiError> {
        let paths = rt.scale.as_ref().ok_or(ApiError::NoSuchResource)?;
        let name = call
            .path
            .name
            .as_deref()
            .ok_or(ApiError::MethodNotAllowed)?;
        let (version, ns) = version_and_namespace(call);
        let current = self.objects.get_at(rt, version, ns, name)?;
        let current_scale = scale::scale_of(&current, paths);
        let wanted = match call.method {
            hyper::Method::GET => return Ok(json_response(StatusCode::OK, &current_scale)),
            hyper::Method::PUT => parse_json(&call.body)?,
            hyper::Method::PATCH => {
                let kind = PatchType::from_content_type(&call.content_type)?;
                let body = patch::parse_body(kind, &call.body)?;
                let kind = if kind == PatchType::Json {
                    kind
                } else {
                    PatchType::Merge
                };
                patch::apply(kind, &current_scale, &body)?
            }
            _ => return Err(ApiError::MethodNotAllowed),
        };
        let asked_version = &wanted["metadata"]["resourceVersion"];
        let current_version = &current["metadata"]["resourceVersion"];
        if !asked_version.is_null() && asked_version.as_str() != current_version.as_str() {
            return Err(ApiError::Conflict {
                resource: format!("{}.{}", rt.plural, rt.group),
                name: name.to_string(),
            });
        }
        let replicas = scale::wanted_replicas(&wanted, name)?;
        let patch = patch::Patch {
            kind: PatchType::Json,
            body: scale::replicas_patch(paths, current_version, replicas),
            manager: call.query.get("fieldManager").cloned(),
        };
        let write = Write::by(&call.user, persist);
        let patched =
            (self.objects).patch_as(write, rt, version, ns, name, &patch, UpdateTarget::Main)?;
        let mut response = json_response(StatusCode::OK, &scale::scale_of(&patched.object, paths));
        super::http::add_warnings(&mut response, &patched.warnings);
        Ok(response)
    }
}
