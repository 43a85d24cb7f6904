//! One request as an admission plugin sees it, with what a plugin may read of the cluster
//! (other objects, the requester's permissions) and ask of it (dry runs), and how a write
//! is made: for real or not, by a client or by the server itself.

use serde_json::Value;

use super::plugin::Operation;
use crate::apiserver::authz::{Authorizer, ResourceAttributes, UserInfo};
use crate::apiserver::errors::ApiError;
use crate::apiserver::object::UpdateTarget;
use crate::apiserver::objects::{ListOptions, Objects};
use crate::apiserver::resources::ResourceType;
use crate::apiserver::selector::LabelSelector;
use crate::apiserver::store::Persist;

/// Who asks for a write, as admission sees it.
#[derive(Clone, Copy, Debug)]
pub enum Origin<'a> {
    /// A client's request, with its user when the server knows it (a webhook's own dry
    /// runs carry none): every plugin judges it.
    Client(Option<&'a UserInfo>),
    /// The server's own write (garbage collection, seeding, an APIService's status): the
    /// mutating plugins run, no validating plugin judges it, as it is no one's request.
    Server,
}

/// How a write is made: for real or as a dry run, and at whose request.
#[derive(Clone, Copy, Debug)]
pub struct Write<'a> {
    pub persist: Persist,
    pub origin: Origin<'a>,
}

impl Write<'static> {
    /// The server's own write, committed.
    pub const SERVER: Write<'static> = Write {
        persist: Persist::Commit,
        origin: Origin::Server,
    };
}

impl<'a> Write<'a> {
    /// A client's request made by `user`.
    pub fn by(user: &'a UserInfo, persist: Persist) -> Write<'a> {
        Write {
            persist,
            origin: Origin::Client(Some(user)),
        }
    }

    /// Whether validating plugins judge this write.
    pub fn validated(&self) -> bool {
        matches!(self.origin, Origin::Client(_))
    }

    pub fn user(&self) -> Option<&'a UserInfo> {
        match self.origin {
            Origin::Client(user) => user,
            Origin::Server => None,
        }
    }
}

/// One request as an admission plugin sees it.
pub struct AdmissionRequest<'a> {
    pub operation: Operation,
    pub resource: &'a ResourceType,
    pub namespace: &'a str,
    /// The object as it would be stored, for a validating plugin (none for a delete, and
    /// none for a mutating plugin, which is given the object to change).
    pub object: Option<&'a Value>,
    /// The stored object (none for a create).
    pub old: Option<&'a Value>,
    pub write: Write<'a>,
    pub(crate) objects: &'a Objects,
}

impl AdmissionRequest<'_> {
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

    /// Whether the requesting user may do what `attributes` say (a SubjectAccessReview).
    /// A request with no known user (a webhook's dry run) is the platform's own: allowed.
    pub fn allows(&self, attributes: &ResourceAttributes) -> Result<bool, ApiError> {
        match self.write.user() {
            Some(user) => Authorizer::new(self.objects).allows(user, attributes),
            None => Ok(true),
        }
    }

    /// The requesting user's name ("" when unknown).
    pub fn user_name(&self) -> &str {
        self.write.user().map_or("", |user| user.name.as_str())
    }

    /// Updates `object` (of `group`/`plural`, named by its metadata) with `dryRun=All`, as a
    /// webhook's client would: the resource's admission judges it, nothing is written.
    /// Returns the plugins' warnings, or the first refusal as the API server reports it.
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
        let body = object.clone();
        let main = UpdateTarget::Main;
        let written =
            (self.objects).update_as(DRY_RUN, &rt, version, namespace, name, body, main)?;
        Ok(written.warnings)
    }

    /// Creates `object` (of `group`/`plural`, in `namespace`) with `dryRun=All`, as a
    /// webhook's client would: the API server's validation of the kind and the resource's
    /// admission judge it, nothing is written. Returns the plugins' warnings, or the first
    /// refusal as the API server reports it.
    pub fn dry_run_create(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        object: &Value,
    ) -> Result<Vec<String>, ApiError> {
        let rt = self.served(group, plural)?;
        let version = version_of(object);
        let body = object.clone();
        let written = (self.objects).create_as(DRY_RUN, &rt, version, namespace, body)?;
        Ok(written.warnings)
    }

    fn served(&self, group: &str, plural: &str) -> Result<ResourceType, ApiError> {
        (self.objects.registry)
            .find_plural(group, plural)
            .ok_or(ApiError::NoSuchResource)
    }
}

/// A webhook's own dry run: a client's, of no user the server knows.
const DRY_RUN: Write<'static> = Write {
    persist: Persist::DryRun,
    origin: Origin::Client(None),
};

/// The version of an object's `apiVersion` (`apps/v1` is `v1`).
fn version_of(object: &Value) -> &str {
    object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or_default()
}
