//! One request as an admission plugin sees it, with what a plugin may read of the cluster
//! (other objects, the requester's permissions) and ask of it (dry runs), and how a write
//! is made: for real or not, by a client or by the server itself.

use serde_json::Value;

use crate::apiserver::errors::ApiError;
use crate::apiserver::identity::{ResourceAttributes, UserInfo};
use crate::apiserver::resources::ResourceType;
use crate::apiserver::store::Persist;

/// What is being done to the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

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

/// The server as its admission plugins see it: what they may read of it and ask of it. The
/// server's objects answer (`apiserver/admission_server.rs`); a trait, so that admission,
/// which the write path runs, does not name the write path.
pub trait Server: Sync {
    /// The object `namespace/name` of the resource `group`/`plural`, if it exists.
    fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, ApiError>;
    /// Up to `limit` objects of `group`/`plural` (in `namespace`, or everywhere) whose labels
    /// `selector` (as a `labelSelector` query parameter writes it) selects.
    fn list_selected(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        selector: &str,
        limit: usize,
    ) -> Result<Vec<Value>, ApiError>;
    /// Whether `user` may do what `attributes` say (a SubjectAccessReview).
    fn allows(&self, user: &UserInfo, attributes: &ResourceAttributes) -> Result<bool, ApiError>;
    /// Creates `object` in `namespace` with `dryRun=All` as a webhook's client; returns the
    /// admission's warnings, or its refusal.
    fn dry_run_create(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        object: &Value,
    ) -> Result<Vec<String>, ApiError>;
    /// Updates `object` (named by its metadata) with `dryRun=All` as a webhook's client.
    fn dry_run_update(
        &self,
        group: &str,
        plural: &str,
        object: &Value,
    ) -> Result<Vec<String>, ApiError>;
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
    pub(crate) server: &'a dyn Server,
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
        self.server.get(group, plural, namespace, name)
    }

    /// Up to `limit` objects of `group`/`plural` (in `namespace`, or everywhere).
    pub fn list(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Value>, ApiError> {
        self.server
            .list_selected(group, plural, namespace, "", limit)
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
        self.server
            .list_selected(group, plural, namespace, selector, limit)
    }

    /// Whether the requesting user may do what `attributes` say (a SubjectAccessReview).
    /// A request with no known user (a webhook's dry run) is the platform's own: allowed.
    pub fn allows(&self, attributes: &ResourceAttributes) -> Result<bool, ApiError> {
        match self.write.user() {
            Some(user) => self.server.allows(user, attributes),
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
        self.server.dry_run_update(group, plural, object)
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
        self.server.dry_run_create(group, plural, namespace, object)
    }
}

/// A webhook's own dry run: a client's, of no user the server knows.
pub(crate) const DRY_RUN: Write<'static> = Write {
    persist: Persist::DryRun,
    origin: Origin::Client(None),
};
