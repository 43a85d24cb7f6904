//! One admission plugin: what it judges (resources and operations), whether it mutates or
//! validates, and how its refusals read to the client.

use serde_json::Value;

use super::request::{AdmissionRequest, Operation};
use crate::apiserver::resources::ResourceType;

/// Why a plugin refuses a request: admission's one refusal.
pub use ::admission::Refusal;

/// The resources a plugin judges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resources {
    /// Every resource (the plugin picks its kinds itself, as a webhook whose rules match
    /// all and that looks at the object's kind).
    All,
    /// The resource `plural` of API group `group` ("" for the core group).
    One { group: String, plural: String },
}

/// A mutating plugin: may change the object (given apart from the request), returns its
/// warnings or refuses.
pub type Mutate =
    dyn Fn(&AdmissionRequest, &mut Value) -> Result<Vec<String>, Refusal> + Send + Sync;

/// A validating plugin: judges the request's object (or, on a delete, the stored one),
/// returns its warnings or refuses.
pub type Validate = dyn Fn(&AdmissionRequest) -> Result<Vec<String>, Refusal> + Send + Sync;

/// The plugin's function, by its phase in the chain.
pub enum Hook {
    Mutating(Box<Mutate>),
    Validating(Box<Validate>),
}

/// How a plugin's refusals read to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wording {
    /// As kube-apiserver reports a webhook's: `admission webhook "NAME" denied the
    /// request: MESSAGE`, with the plugin's code.
    Webhook,
    /// As an invalid object: `KIND "NAME" is invalid: MESSAGE` (422), how the embedded
    /// server has always reported its built-in defaulting and validation of the platform's
    /// kinds.
    InvalidObject,
    /// As kube-apiserver reports its compiled-in plugins' refusals (Priority's):
    /// `RESOURCE "NAME" is forbidden: MESSAGE` (403).
    Forbidden,
}

/// One plugin of the chain.
pub struct AdmissionPlugin {
    /// The plugin's name, as refusals quote it (`validate-hco.kubevirt.io`).
    pub name: String,
    pub resources: Resources,
    pub operations: Vec<Operation>,
    pub wording: Wording,
    pub hook: Hook,
}

impl AdmissionPlugin {
    /// A validating webhook of the resource `group`/`plural`.
    pub fn validating(
        name: &str,
        resource: (&str, &str),
        operations: &[Operation],
        validate: Box<Validate>,
    ) -> AdmissionPlugin {
        let hook = Hook::Validating(validate);
        AdmissionPlugin::of_one(name, resource, operations, Wording::Webhook, hook)
    }

    /// A mutating plugin of creates and updates of `resources`.
    pub fn mutating(
        name: &str,
        resources: Resources,
        wording: Wording,
        mutate: Box<Mutate>,
    ) -> AdmissionPlugin {
        AdmissionPlugin {
            name: name.to_owned(),
            resources,
            operations: vec![Operation::Create, Operation::Update],
            wording,
            hook: Hook::Mutating(mutate),
        }
    }

    /// A plugin built into the server, of the resource `group`/`plural`; its refusals read
    /// as an invalid object's.
    pub fn built_in(
        name: &str,
        resource: (&str, &str),
        operations: &[Operation],
        hook: Hook,
    ) -> AdmissionPlugin {
        AdmissionPlugin::of_one(name, resource, operations, Wording::InvalidObject, hook)
    }

    /// A plugin built into the server, of the resource `group`/`plural`; its refusals read
    /// as kube-apiserver's Forbidden.
    pub fn forbidding(
        name: &str,
        resource: (&str, &str),
        operations: &[Operation],
        hook: Hook,
    ) -> AdmissionPlugin {
        AdmissionPlugin::of_one(name, resource, operations, Wording::Forbidden, hook)
    }

    fn of_one(
        name: &str,
        (group, plural): (&str, &str),
        operations: &[Operation],
        wording: Wording,
        hook: Hook,
    ) -> AdmissionPlugin {
        AdmissionPlugin {
            name: name.to_owned(),
            resources: Resources::One {
                group: group.to_owned(),
                plural: plural.to_owned(),
            },
            operations: operations.to_vec(),
            wording,
            hook,
        }
    }

    /// Whether the plugin judges `operation` on `resource`.
    pub fn judges(&self, resource: &ResourceType, operation: Operation) -> bool {
        let resource_matches = match &self.resources {
            Resources::All => true,
            Resources::One { group, plural } => {
                *group == resource.group && *plural == resource.plural
            }
        };
        resource_matches && self.operations.contains(&operation)
    }

    pub fn is_mutating(&self) -> bool {
        matches!(self.hook, Hook::Mutating(_))
    }
}
