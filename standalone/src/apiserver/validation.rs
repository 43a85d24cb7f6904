//! Validating admission that may read other objects and warn: the cluster's validating
//! webhooks that look beyond the object they judge (the template validator reads the VM's
//! template, HCO and virt-operator refuse an uninstall while workloads exist).
//!
//! The checks run before the write, outside its transaction, as kube-apiserver calls its
//! webhooks before it persists: a write racing the check may slip past it, as upstream.

use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::errors::ApiError;
use super::object::UpdateTarget;
use super::objects::{ListOptions, Objects};
use super::resources::ResourceType;
use super::selector::LabelSelector;
use super::store::Persist;

/// What is being done to the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

/// One request as a validating webhook sees it.
pub struct ValidationRequest<'a> {
    pub operation: Operation,
    pub resource: &'a ResourceType,
    pub namespace: &'a str,
    /// The object as it would be stored (none for a delete).
    pub object: Option<&'a Value>,
    /// The stored object (none for a create).
    pub old: Option<&'a Value>,
    objects: &'a Objects,
    validations: &'a Validations,
}

impl ValidationRequest<'_> {
    /// The object `namespace/name` of the resource `group`/`plural`, if it exists.
    pub fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, ApiError> {
        let Some(rt) = self.objects.registry.find_plural(group, plural) else {
            return Ok(None);
        };
        let namespace = if rt.namespaced { namespace } else { "" };
        self.objects.store.get(&rt.storage_key(), namespace, name)
    }

    /// Up to `limit` objects of `group`/`plural` (in `namespace`, or everywhere).
    pub fn list(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Value>, ApiError> {
        self.list_selected(group, plural, namespace, "", limit)
    }

    /// [`Self::list`] of the objects whose labels `selector` (a label selector as a
    /// `labelSelector` query parameter writes it) selects.
    pub fn list_selected(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        selector: &str,
        limit: usize,
    ) -> Result<Vec<Value>, ApiError> {
        let Some(rt) = self.objects.registry.find_plural(group, plural) else {
            return Ok(Vec::new());
        };
        let options = ListOptions {
            labels: LabelSelector::parse(selector)?,
            limit: Some(limit),
            ..Default::default()
        };
        Ok(self.objects.list(&rt, namespace, &options)?.items)
    }

    /// Updates `object` (of `group`/`plural`, named by its metadata) with `dryRun=All`, as a
    /// webhook's client would: the resource's own admission and validating webhooks judge
    /// it, nothing is written. Returns their warnings, or the first refusal as the API
    /// server reports it.
    pub fn dry_run_update(
        &self,
        group: &str,
        plural: &str,
        object: &Value,
    ) -> Result<Vec<String>, ApiError> {
        let rt = self.served(group, plural)?;
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let version = version_of(object);
        let old = self.objects.get_at(&rt, version, namespace, name)?;
        let operation = Operation::Update;
        let warnings = self.validations.run(
            self.objects,
            operation,
            &rt,
            namespace,
            Some(object),
            Some(&old),
        )?;
        let (persist, main) = (Persist::DryRun, UpdateTarget::Main);
        let body = object.clone();
        (self.objects).update_as(persist, &rt, version, namespace, name, body, main)?;
        Ok(warnings)
    }

    /// Creates `object` (of `group`/`plural`, in `namespace`) with `dryRun=All`, as a
    /// webhook's client would: the API server's validation of the kind and the resource's
    /// validating webhooks judge it, nothing is written. Returns the webhooks' warnings, or
    /// the first refusal as the API server reports it.
    pub fn dry_run_create(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        object: &Value,
    ) -> Result<Vec<String>, ApiError> {
        let rt = self.served(group, plural)?;
        let version = version_of(object);
        let warnings = self.validations.run(
            self.objects,
            Operation::Create,
            &rt,
            namespace,
            Some(object),
            None,
        )?;
        let body = object.clone();
        (self.objects).create_as(Persist::DryRun, &rt, version, namespace, body)?;
        Ok(warnings)
    }

    fn served(&self, group: &str, plural: &str) -> Result<ResourceType, ApiError> {
        (self.objects.registry)
            .find_plural(group, plural)
            .ok_or(ApiError::NoSuchResource)
    }
}

/// The version of an object's `apiVersion` (`apps/v1` is `v1`).
fn version_of(object: &Value) -> &str {
    object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or_default()
}

/// A check's answer: allowed (with warnings for the client), or refused.
pub type Verdict = Result<Vec<String>, ApiError>;

/// A webhook's judgement of one request: the warnings to pass on, or the refusal.
pub type Check = dyn Fn(&ValidationRequest) -> Result<Vec<String>, Refusal> + Send + Sync;

/// A validating webhook of one resource.
pub struct Validation {
    /// The webhook's name, as refusals quote it (`validate-hco.kubevirt.io`).
    pub name: String,
    pub group: String,
    pub plural: String,
    pub operations: Vec<Operation>,
    /// Returns the warnings to pass on, or the reason for refusing.
    pub check: Box<Check>,
}

/// Why a webhook refuses a request: admission's one refusal.
pub use admission::Refusal;

/// The validating webhooks registered so far; more may be added while the server runs.
#[derive(Default)]
pub struct Validations {
    registered: RwLock<Vec<Arc<Validation>>>,
}

impl Validations {
    pub fn register(&self, validation: Validation) {
        let mut registered = self.registered.write().unwrap_or_else(|e| e.into_inner());
        registered.push(Arc::new(validation));
    }

    /// Whether any webhook judges `operation` on `resource` (so the caller need not build
    /// the prospective object otherwise).
    pub fn applies(&self, resource: &ResourceType, operation: Operation) -> bool {
        !self.matching(resource, operation).is_empty()
    }

    fn matching(&self, resource: &ResourceType, operation: Operation) -> Vec<Arc<Validation>> {
        let registered = self.registered.read().unwrap_or_else(|e| e.into_inner());
        registered
            .iter()
            .filter(|v| {
                v.group == resource.group
                    && v.plural == resource.plural
                    && v.operations.contains(&operation)
            })
            .cloned()
            .collect()
    }

    /// Runs every webhook of the request; the first refusal wins, as kube-apiserver's.
    pub fn run(
        &self,
        objects: &Objects,
        operation: Operation,
        resource: &ResourceType,
        namespace: &str,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Verdict {
        let request = ValidationRequest {
            operation,
            resource,
            namespace,
            object,
            old,
            objects,
            validations: self,
        };
        let mut warnings = Vec::new();
        for validation in self.matching(resource, operation) {
            match (validation.check)(&request) {
                Ok(more) => warnings.extend(more),
                Err(refusal) => return Err(refused(&validation.name, refusal, warnings)),
            }
        }
        Ok(warnings)
    }
}

/// A refusal as kube-apiserver reports a webhook's: its name, then its message, with the
/// webhook's code (a code below 400 becomes 400), and the warnings of the webhooks before
/// it and its own.
fn refused(webhook: &str, refusal: Refusal, mut warnings: Vec<String>) -> ApiError {
    let message = format!(
        "admission webhook \"{webhook}\" denied the request: {}",
        refusal.message
    );
    warnings.extend(refusal.warnings);
    ApiError::Refused {
        code: refusal.code,
        message,
        warnings,
    }
}
