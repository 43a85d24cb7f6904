//! The verbs of the Kubernetes API on stored objects (get, list, create, update, patch,
//! delete), independent of HTTP: the router translates requests into these calls, and the
//! garbage collector deletes through them too.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::admission::{AdmissionChain, AdmissionPlugin, AdmissionRequest, Operation, Write};
use super::conversion;
use super::crd_schema::{CrdSchemas, Input};
use super::errors::ApiError;
use super::event_view;
use super::managed_fields;
use super::object::{self, UpdateTarget};
use super::patch::{self, Patch, PatchType};
use super::pod_placement;
use super::priority_class;
use super::resource_claim;
use super::resources::{Registry, ResourceType, from_crd};
use super::selector::{FieldSelector, LabelSelector};
use super::store::{Change, EventType, Persist, Store, Written};

/// A write's result: the object as written (or as it would be, on a dry run) and the
/// admission plugins' warnings.
#[derive(Debug)]
pub struct Outcome {
    pub object: Value,
    pub warnings: Vec<String>,
}

/// How a delete treats the object's dependents.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        match text {
            "" | "Background" => Ok(Propagation::Background),
            "Foreground" => Ok(Propagation::Foreground),
            "Orphan" => Ok(Propagation::Orphan),
            other => Err(ApiError::BadRequest(format!(
                "propagationPolicy: Unsupported value: \"{other}\": supported values: \"Background\", \"Foreground\", \"Orphan\""
            ))),
        }
    }
}

/// A list request's filters and paging.
#[derive(Default)]
pub struct ListOptions {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

pub struct ListPage {
    pub items: Vec<Value>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// How many times an update is made again when the object changed while it was admitted.
const UPDATE_ATTEMPTS: usize = 16;

pub struct Objects {
    pub store: Store,
    pub registry: Registry,
    admission: AdmissionChain,
}

impl Objects {
    pub fn new(store: Store, registry: Registry) -> Self {
        Objects {
            store,
            registry,
            admission: AdmissionChain::new(Vec::new()),
        }
    }

    /// Runs `plugin` on writes from now on, after the plugins registered before it.
    pub fn register_admission(&self, plugin: AdmissionPlugin) {
        self.admission.register(plugin);
    }

    /// Registers the resources of every stored CRD (after a restart).
    pub fn load_crds(&self) -> Result<(), ApiError> {
        let (crds, _) =
            self.store
                .list("apiextensions.k8s.io/customresourcedefinitions", None, None)?;
        for crd in &crds {
            if let Some(rt) = from_crd(crd) {
                self.registry.insert(rt);
            }
        }
        Ok(())
    }

    fn not_found(rt: &ResourceType, name: &str) -> ApiError {
        ApiError::NotFound {
            resource: rt.qualified_name(),
            name: name.to_string(),
        }
    }

    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.store
            .get(&rt.storage_key(), ns, name)?
            .ok_or_else(|| Self::not_found(rt, name))
    }

    /// [`Objects::get`] at `version` of the resource.
    pub fn get_at(
        &self,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        with_version(rt, version, self.get(rt, ns, name)?)
    }

    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        options: &ListOptions,
    ) -> Result<ListPage, ApiError> {
        let after = options
            .continue_token
            .as_deref()
            .map(decode_continue)
            .transpose()?;
        let keep = |o: &Value| {
            let matches = |o: &Value| options.labels.matches(o) && options.fields.matches(o);
            if rt.is_events_view() {
                // Selectors name the fields of the shape served (`regarding.name=...`).
                matches(&served_shape(rt, o.clone()))
            } else {
                matches(o)
            }
        };
        let scan = self.store.scan(
            &rt.storage_key(),
            ns,
            after.as_ref().map(|(n, m)| (n.as_str(), m.as_str())),
            options.limit.filter(|l| *l > 0),
            &keep,
        )?;
        let mut continue_token = None;
        let mut remaining = None;
        if scan.more {
            if let Some(last) = scan.items.last() {
                let ns = last["metadata"]["namespace"].as_str().unwrap_or_default();
                continue_token = Some(encode_continue(ns, object::name(last)));
                // As kube-apiserver: a count only when no selector filters the list.
                let unfiltered = options.labels.is_empty() && options.fields.is_empty();
                remaining = scan.remaining.filter(|_| unfiltered);
            }
        }
        Ok(ListPage {
            items: scan.items,
            resource_version: scan.resource_version,
            continue_token,
            remaining,
        })
    }

    fn check_namespace(&self, rt: &ResourceType, ns: &str) -> Result<(), ApiError> {
        if !rt.namespaced {
            return Ok(());
        }
        let namespace =
            self.store
                .get("/namespaces", "", ns)?
                .ok_or_else(|| ApiError::NotFound {
                    resource: "namespaces".into(),
                    name: ns.to_string(),
                })?;
        if object::is_deleting(&namespace) {
            return Err(ApiError::Forbidden(format!(
                "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                rt.qualified_name(),
                ns
            )));
        }
        Ok(())
    }

    pub fn create(
        &self,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        body: Value,
    ) -> Result<Value, ApiError> {
        Ok(self.create_as(Write::SERVER, rt, version, ns, body)?.object)
    }

    /// [`Objects::create`] made as `write` says (with [`Persist::DryRun`] everything but
    /// the write), through admission: the mutating plugins, the schema, the validating
    /// plugins.
    pub fn create_as(
        &self,
        write: Write,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        mut body: Value,
    ) -> Result<Outcome, ApiError> {
        object::check_type(rt, version, &mut body)?;
        let mut body = stored_shape(rt, body);
        Self::prune_and_default(rt, version, &mut body)?;
        self.check_namespace(rt, ns)?;
        let mut new = object::prepare_create(rt, if rt.namespaced { ns } else { "" }, body)?;
        let mut request = self.admission_request(write, Operation::Create, rt, ns);
        let warnings = self.admission.mutate(&request, &mut new)?;
        Self::check_schema(rt, version, &new, None)?;
        let is_crd = rt.plural == "customresourcedefinitions";
        let crd_type = if is_crd {
            Some(self.check_crd(&new)?)
        } else {
            None
        };
        request.object = Some(&new);
        let warnings = self.admission.validate(&request, warnings)?;
        let name = object::name(&new).to_string();
        let new = at_storage_version(rt, new)?;
        let key_ns = if rt.namespaced { ns } else { "" };
        let persist = write.persist;
        let written = self.store.write_as(
            persist,
            &rt.storage_key(),
            key_ns,
            &name,
            |current| match current {
                Some(_) => Err(ApiError::AlreadyExists {
                    resource: rt.qualified_name(),
                    name: name.clone(),
                }),
                None => Ok(Change::Put(new)),
            },
        )?;
        if let Some(crd_type) = crd_type.filter(|_| persist == Persist::Commit) {
            self.registry.insert(crd_type);
        }
        let object = with_version(rt, version, written.object)?;
        Ok(Outcome { object, warnings })
    }

    /// The admission request of a write of `operation` on `rt` in `ns`, with no object
    /// yet.
    pub(crate) fn admission_request<'a>(
        &'a self,
        write: Write<'a>,
        operation: Operation,
        rt: &'a ResourceType,
        ns: &'a str,
    ) -> AdmissionRequest<'a> {
        AdmissionRequest {
            operation,
            resource: rt,
            namespace: ns,
            object: None,
            old: None,
            write,
            server: self,
        }
    }

    fn check_crd(&self, crd: &Value) -> Result<ResourceType, ApiError> {
        let invalid = |message: String| ApiError::Invalid {
            kind: "CustomResourceDefinition".into(),
            name: object::name(crd).to_string(),
            message,
        };
        let rt = from_crd(crd)
            .ok_or_else(|| invalid("spec: group, names, scope and versions are required".into()))?;
        let expected = format!("{}.{}", rt.plural, rt.group);
        if object::name(crd) != expected {
            return Err(invalid(format!(
                "metadata.name: Invalid value: must be spec.names.plural+\".\"+spec.group (\"{expected}\")"
            )));
        }
        if let Err(errors) = CrdSchemas::compile(crd) {
            return Err(ApiError::SchemaInvalid {
                kind: "CustomResourceDefinition".into(),
                group: "apiextensions.k8s.io".into(),
                name: object::name(crd).to_string(),
                errors,
            });
        }
        Ok(rt)
    }

    /// An object as written, pruned of what its kind's schema at `version` does not declare
    /// (a custom resource's CRD's, a built-in kind's) and given the defaults a CRD
    /// declares, as kube-apiserver decodes a request's object before anything compares it
    /// with the stored one (so an undeclared field, or a default written out, is no change
    /// and no new generation).
    fn prune_and_default(
        rt: &ResourceType,
        version: &str,
        object: &mut Value,
    ) -> Result<(), ApiError> {
        if let Some(schemas) = &rt.schemas {
            schemas.prune(version, object, Input::Object);
            schemas.default(version, object);
        } else if !rt.is_events_view() {
            // A built-in kind keeps only what its Go type has, of the types it has.
            super::openapi::prune_builtin(rt, version, object, Input::Object).map_err(|error| {
                ApiError::BadRequest(format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: {error}",
                    kind = rt.kind
                ))
            })?;
        }
        Ok(())
    }

    /// An object checked as kube-apiserver checks every write: a custom resource against
    /// its CRD's schema at `version`, a built-in kind's pod placement; `old` is the stored
    /// object of an update.
    fn check_schema(
        rt: &ResourceType,
        version: &str,
        object: &Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let errors = match &rt.schemas {
            Some(schemas) => schemas.validate(version, object, old),
            None => {
                // What an update does not change is not judged again: an object stored
                // before this check may still have its status and finalizers written.
                let before = old.map_or_else(Vec::new, |old| {
                    pod_placement::validate(&rt.group, &rt.kind, old)
                });
                let mut errors = pod_placement::validate(&rt.group, &rt.kind, object);
                errors.retain(|error| !before.contains(error));
                errors.extend(priority_class::validate(&rt.group, &rt.kind, object, old));
                errors.extend(resource_claim::validate(&rt.group, &rt.kind, object));
                errors
            }
        };
        if errors.is_empty() {
            return Ok(());
        }
        Err(ApiError::SchemaInvalid {
            kind: rt.kind.clone(),
            group: rt.group.clone(),
            name: object::name(object).to_string(),
            errors,
        })
    }

    pub fn update(
        &self,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        body: Value,
        target: UpdateTarget,
    ) -> Result<Value, ApiError> {
        let server = Write::SERVER;
        Ok(self
            .update_as(server, rt, version, ns, name, body, target)?
            .object)
    }

    /// [`Objects::update`] made as `write` says (with [`Persist::DryRun`] everything but
    /// the write), through admission.
    #[allow(clippy::too_many_arguments)]
    pub fn update_as(
        &self,
        write: Write,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        mut body: Value,
        target: UpdateTarget,
    ) -> Result<Outcome, ApiError> {
        object::check_type(rt, version, &mut body)?;
        let body = stored_shape(rt, body);
        self.write_update(write, rt, version, (ns, name), target, |_| Ok(body.clone()))
    }

    pub fn patch(
        &self,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        patch: &Patch,
        target: UpdateTarget,
    ) -> Result<Value, ApiError> {
        let server = Write::SERVER;
        Ok(self
            .patch_as(server, rt, version, ns, name, patch, target)?
            .object)
    }

    /// [`Objects::patch`] made as `write` says (with [`Persist::DryRun`] everything but
    /// the write), through admission; a server-side apply of a missing object creates it.
    #[allow(clippy::too_many_arguments)]
    pub fn patch_as(
        &self,
        write: Write,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        patch: &Patch,
        target: UpdateTarget,
    ) -> Result<Outcome, ApiError> {
        let (kind, manager, patch) = (patch.kind, patch.manager.as_deref(), &patch.body);
        // An apply records its manager's fields, and takes off what it no longer applies.
        let applier = manager.filter(|_| kind == PatchType::Apply);
        let subresource = (target == UpdateTarget::Status).then_some("status");
        if kind == PatchType::Apply && target == UpdateTarget::Main {
            let exists = self.store.get(&rt.storage_key(), ns, name)?.is_some();
            if !exists {
                let mut body = patch.clone();
                body["metadata"]["name"] = json!(name);
                if let Some(manager) = applier {
                    managed_fields::record_apply(&mut body, &json!({}), patch, manager, None);
                }
                return self.create_as(write, rt, version, ns, body);
            }
        }
        self.write_update(write, rt, version, (ns, name), target, |current| {
            let mut new = patched(rt, current, kind, patch)?;
            if let Some(manager) = applier {
                managed_fields::record_apply(&mut new, current, patch, manager, subresource);
            }
            Ok(new)
        })
    }

    /// Drops one finalizer; the last one gone from an object being deleted deletes it.
    pub fn remove_finalizer(
        &self,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        finalizer: &str,
    ) -> Result<Value, ApiError> {
        let (server, main) = (Write::SERVER, UpdateTarget::Main);
        let written = self.write_update(server, rt, version, (ns, name), main, |current| {
            let mut new = current.clone();
            if let Some(list) = new["metadata"]["finalizers"].as_array_mut() {
                list.retain(|f| f != finalizer);
            }
            Ok(new)
        })?;
        Ok(written.object)
    }

    /// Reads, transforms, admits and writes one object; removing the last finalizer of an
    /// object being deleted deletes it. Admission runs outside the store's transaction, as
    /// its plugins may read other objects, so the change is written only if the object is
    /// still the one it was made from; else it is made again from the new one, as
    /// kube-apiserver's guaranteed update retries on a conflict.
    fn write_update<F>(
        &self,
        write: Write,
        rt: &ResourceType,
        version: &str,
        (ns, name): (&str, &str),
        target: UpdateTarget,
        transform: F,
    ) -> Result<Outcome, ApiError>
    where
        F: Fn(&Value) -> Result<Value, ApiError>,
    {
        let key_ns = if rt.namespaced { ns } else { "" };
        for _ in 0..UPDATE_ATTEMPTS {
            let stored = (self.store.get(&rt.storage_key(), key_ns, name)?)
                .ok_or_else(|| Self::not_found(rt, name))?;
            let current = with_version(rt, version, stored.clone())?;
            let proposed = transform(&current)?;
            let update = (rt, version, ns, target);
            let (change, warnings) = self.plan_update(write, update, &stored, current, proposed)?;
            let mut raced = false;
            let written =
                self.store
                    .write_as(write.persist, &rt.storage_key(), key_ns, name, |now| {
                        let now = now.ok_or_else(|| Self::not_found(rt, name))?;
                        raced = now["metadata"]["resourceVersion"]
                            != stored["metadata"]["resourceVersion"];
                        if raced {
                            return Err(Self::conflict(rt, name));
                        }
                        Ok(change)
                    });
            if raced {
                continue;
            }
            let written = written?;
            self.after_write(rt, write.persist, &written);
            let object = with_version(rt, version, written.object)?;
            return Ok(Outcome { object, warnings });
        }
        Err(Self::conflict(rt, name))
    }

    /// The change an update makes of `stored` (at `version`, `current`) with `proposed`,
    /// admitted (on the object itself, not its status), with the plugins' warnings.
    fn plan_update(
        &self,
        write: Write,
        (rt, version, ns, target): (&ResourceType, &str, &str, UpdateTarget),
        stored: &Value,
        current: Value,
        mut proposed: Value,
    ) -> Result<(Change, Vec<String>), ApiError> {
        // The request's version is the one it is judged at, as kube-apiserver converts
        // only to store.
        Self::prune_and_default(rt, version, &mut proposed)?;
        let mut new = object::prepare_update(rt, &current, proposed, target)?;
        let admitted = target == UpdateTarget::Main;
        // Plugins compare the new object with the stored one as kube-apiserver shows it to
        // them: read back with its CRD's defaults, as the new one has them.
        let mut old = current.clone();
        if let Some(schemas) = &rt.schemas {
            schemas.default(version, &mut old);
        }
        let mut request = self.admission_request(write, Operation::Update, rt, ns);
        request.old = Some(&old);
        let mut warnings = Vec::new();
        if admitted {
            warnings = self.admission.mutate(&request, &mut new)?;
            if rt.plural == "customresourcedefinitions" {
                self.check_crd(&new)?;
                object::record_storage_version(&mut new);
            }
        }
        Self::check_schema(rt, version, &new, Some(&current))?;
        if admitted {
            request.object = Some(&new);
            warnings = self.admission.validate(&request, warnings)?;
        }
        let mut new = at_storage_version(rt, new)?;
        if rt.status_subresource && target == UpdateTarget::Status {
            // A status write leaves the rest as stored, not as converted back (but for an
            // applier's record of what it applied).
            let status = new["status"].take();
            let managed = new["metadata"]["managedFields"].take();
            new = stored.clone();
            new["status"] = status;
            if !managed.is_null() {
                new["metadata"]["managedFields"] = managed;
            }
        }
        let change = if object::is_deleting(&new) && object::finalizers(&new).is_empty() {
            Change::Delete
        } else if new == *stored {
            Change::Keep
        } else {
            Change::Put(new)
        };
        Ok((change, warnings))
    }

    /// Registers or unregisters a CRD's resource once its write is committed.
    fn after_write(&self, rt: &ResourceType, persist: Persist, written: &Written) {
        if rt.plural != "customresourcedefinitions" || persist != Persist::Commit {
            return;
        }
        match written.event {
            Some(EventType::Deleted) => self.unregister_crd(&written.object),
            _ => {
                if let Some(crd_type) = from_crd(&written.object) {
                    self.registry.insert(crd_type);
                }
            }
        }
    }

    fn conflict(rt: &ResourceType, name: &str) -> ApiError {
        ApiError::Conflict {
            resource: rt.qualified_name(),
            name: name.to_string(),
        }
    }

    pub fn delete(
        &self,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        propagation: Propagation,
        precondition_uid: Option<&str>,
    ) -> Result<Value, ApiError> {
        let options = (propagation, precondition_uid);
        Ok(self
            .delete_as(Write::SERVER, rt, version, ns, name, options)?
            .object)
    }

    /// [`Objects::delete`], or with [`Persist::DryRun`] everything but the write (and the
    /// dependents left as they are).
    pub fn delete_as(
        &self,
        write: Write,
        rt: &ResourceType,
        version: &str,
        ns: &str,
        name: &str,
        (propagation, precondition_uid): (Propagation, Option<&str>),
    ) -> Result<Outcome, ApiError> {
        let key_ns = if rt.namespaced { ns } else { "" };
        let persist = write.persist;
        let mut request = self.admission_request(write, Operation::Delete, rt, ns);
        let mut warnings = Vec::new();
        if self.admission.validates(&request) {
            let old = self.get_at(rt, version, ns, name)?;
            request.old = Some(&old);
            warnings = self.admission.validate(&request, warnings)?;
        }
        if propagation == Propagation::Orphan && persist == Persist::Commit {
            let current = self.get(rt, key_ns, name)?;
            self.orphan_dependents(object::uid(&current))?;
        }
        let is_namespace = rt.group.is_empty() && rt.plural == "namespaces";
        let has_content = is_namespace && !self.store.keys_in_namespace(name)?.is_empty();
        let written = self
            .store
            .write_as(persist, &rt.storage_key(), key_ns, name, |current| {
                let current = current.ok_or_else(|| Self::not_found(rt, name))?;
                if let Some(uid) = precondition_uid {
                    if uid != object::uid(&current) {
                        return Err(ApiError::Conflict {
                            resource: rt.qualified_name(),
                            name: name.to_string(),
                        });
                    }
                }
                let mut finalizers = object::finalizers(&current);
                if propagation == Propagation::Foreground
                    && !finalizers.iter().any(|f| f == FOREGROUND_FINALIZER)
                {
                    finalizers.push(FOREGROUND_FINALIZER.to_string());
                }
                if finalizers.is_empty() && !has_content {
                    return Ok(Change::Delete);
                }
                if object::is_deleting(&current) && object::finalizers(&current) == finalizers {
                    return Ok(Change::Keep);
                }
                let mut marked = current.clone();
                if !object::is_deleting(&current) {
                    marked["metadata"]["deletionTimestamp"] = json!(object::now());
                    marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                }
                if !finalizers.is_empty() {
                    marked["metadata"]["finalizers"] = json!(finalizers);
                }
                if is_namespace {
                    marked["status"]["phase"] = json!("Terminating");
                }
                Ok(Change::Put(marked))
            })?;
        if rt.plural == "customresourcedefinitions"
            && persist == Persist::Commit
            && written.event == Some(EventType::Deleted)
        {
            self.unregister_crd(&written.object);
        }
        let object = with_version(rt, version, written.object)?;
        Ok(Outcome { object, warnings })
    }

    fn unregister_crd(&self, crd: &Value) {
        if let Some(rt) = from_crd(crd) {
            self.registry.remove(&rt.group, &rt.plural);
        }
    }

    /// Removes the owner reference to `uid` from every dependent.
    fn orphan_dependents(&self, uid: &str) -> Result<(), ApiError> {
        for key in self.store.dependents(uid)? {
            self.store
                .write(&key.resource, &key.namespace, &key.name, |current| {
                    let Some(mut dependent) = current else {
                        return Ok(Change::Keep);
                    };
                    let metadata = &mut dependent["metadata"];
                    if let Some(refs) = metadata["ownerReferences"].as_array_mut() {
                        refs.retain(|r| r["uid"] != uid);
                        // An empty list is left out, as the API server serves it.
                        if refs.is_empty()
                            && let Some(fields) = metadata.as_object_mut()
                        {
                            fields.remove("ownerReferences");
                        }
                    }
                    Ok(Change::Put(dependent))
                })?;
        }
        Ok(())
    }

    /// The resource type stored under `key`, at its first served version.
    pub fn type_of_key(&self, key: &str) -> Option<(ResourceType, String)> {
        let (group, plural) = key.split_once('/')?;
        self.registry
            .all()
            .into_iter()
            .find(|rt| rt.group == group && rt.plural == plural)
            .and_then(|rt| {
                let version = rt.versions.first()?.clone();
                Some((rt, version))
            })
    }
}

/// An object as it is stored: an `events.k8s.io` Event as a core Event.
fn stored_shape(rt: &ResourceType, object: Value) -> Value {
    if rt.is_events_view() {
        event_view::to_core(object)
    } else {
        object
    }
}

/// A stored object in the shape of the API `rt` serves.
fn served_shape(rt: &ResourceType, object: Value) -> Value {
    if rt.is_events_view() {
        event_view::from_core(object)
    } else {
        object
    }
}

/// Objects are stored once; read at another served version (or through another API of the
/// same objects), they carry that apiVersion and shape: a custom resource converted as its
/// CRD says ([`conversion`]).
pub fn with_version(rt: &ResourceType, version: &str, object: Value) -> Result<Value, ApiError> {
    let mut object = served_shape(rt, object);
    if let Some(schemas) = &rt.schemas {
        // Read from storage, it is defaulted at the version it was stored at, as
        // kube-apiserver defaults what it decodes; nothing is written back.
        let stored = object["apiVersion"]
            .as_str()
            .and_then(version_of)
            .map(str::to_string);
        if let Some(stored) = stored {
            schemas.default(&stored, &mut object);
        }
        return conversion::to_version(rt, object, version);
    }
    if object.is_object() {
        object["apiVersion"] = json!(rt.api_version(version));
    }
    Ok(object)
}

/// The version part of an `apiVersion` (`v1` of `hco.kubevirt.io/v1`).
fn version_of(api_version: &str) -> Option<&str> {
    api_version.rsplit('/').next().filter(|v| !v.is_empty())
}

/// A custom resource at its storage version, as it is written.
fn at_storage_version(rt: &ResourceType, object: Value) -> Result<Value, ApiError> {
    if rt.schemas.is_none() {
        return Ok(object);
    }
    conversion::to_version(rt, object, &rt.storage_version)
}

fn encode_continue(ns: &str, name: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{ns}\0{name}"))
}

fn decode_continue(token: &str) -> Result<(String, String), ApiError> {
    let invalid = || ApiError::BadRequest(format!("continue key is not valid: \"{token}\""));
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (ns, name) = text.split_once('\0').ok_or_else(invalid)?;
    Ok((ns.to_string(), name.to_string()))
}

/// `current` with a patch applied, in the stored shape.
fn patched(
    rt: &ResourceType,
    current: &Value,
    kind: PatchType,
    patch: &Value,
) -> Result<Value, ApiError> {
    // A patch is written against the shape it was sent in.
    let current = &served_shape(rt, current.clone());
    let mut patched = patch::apply(kind, current, patch)?;
    // A patch carries a precondition only if it names a resourceVersion itself.
    if patch["metadata"].get("resourceVersion").is_none() {
        patched["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    }
    Ok(stored_shape(rt, patched))
}
