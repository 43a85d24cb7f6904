//! The chain of admission plugins: built-in ones first, then the registered ones in the
//! order registered; mutating ones before the schema check, validating ones after it.

use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::plugin::{AdmissionPlugin, Hook, Refusal, Wording};
use super::request::AdmissionRequest;
use super::{default_storage_class, priority};
use crate::apiserver::errors::ApiError;
use crate::apiserver::object;

/// Every admission plugin of the server; more may be registered while it runs.
pub struct AdmissionChain {
    plugins: RwLock<Vec<Arc<AdmissionPlugin>>>,
}

impl AdmissionChain {
    /// The built-in plugins, then `registered`.
    pub fn new(registered: Vec<AdmissionPlugin>) -> AdmissionChain {
        let plugins = std::iter::once(default_storage_class::plugin())
            .chain(priority::plugins())
            .chain(registered)
            .map(Arc::new)
            .collect();
        AdmissionChain {
            plugins: RwLock::new(plugins),
        }
    }

    /// Runs `plugin` from now on, after those registered before it.
    pub fn register(&self, plugin: AdmissionPlugin) {
        let mut plugins = self.plugins.write().unwrap_or_else(|e| e.into_inner());
        plugins.push(Arc::new(plugin));
    }

    /// Whether a validating plugin judges `operation` on `resource` (so the caller need
    /// not build the prospective object otherwise).
    pub fn validates(&self, request: &AdmissionRequest) -> bool {
        request.write.validated()
            && self
                .matching(request)
                .iter()
                .any(|plugin| !plugin.is_mutating())
    }

    /// Runs every mutating plugin of the request on `object`; returns their warnings, or
    /// the first refusal.
    pub fn mutate(
        &self,
        request: &AdmissionRequest,
        object: &mut Value,
    ) -> Result<Vec<String>, ApiError> {
        let mut warnings = Vec::new();
        for plugin in self.matching(request) {
            let Hook::Mutating(mutate) = &plugin.hook else {
                continue;
            };
            match mutate(request, object) {
                Ok(more) => warnings.extend(more),
                Err(refusal) => return Err(refused(&plugin, request, object, refusal, warnings)),
            }
        }
        Ok(warnings)
    }

    /// Runs every validating plugin of a client's request, after `warnings` gathered so
    /// far; returns them with the plugins' own, or the first refusal (a server's own write
    /// is judged by none).
    pub fn validate(
        &self,
        request: &AdmissionRequest,
        mut warnings: Vec<String>,
    ) -> Result<Vec<String>, ApiError> {
        if !request.write.validated() {
            return Ok(warnings);
        }
        for plugin in self.matching(request) {
            let Hook::Validating(validate) = &plugin.hook else {
                continue;
            };
            match validate(request) {
                Ok(more) => warnings.extend(more),
                Err(refusal) => {
                    let subject = request.object.or(request.old).unwrap_or(&Value::Null);
                    return Err(refused(&plugin, request, subject, refusal, warnings));
                }
            }
        }
        Ok(warnings)
    }

    fn matching(&self, request: &AdmissionRequest) -> Vec<Arc<AdmissionPlugin>> {
        let plugins = self.plugins.read().unwrap_or_else(|e| e.into_inner());
        plugins
            .iter()
            .filter(|plugin| plugin.judges(request.resource, request.operation))
            .cloned()
            .collect()
    }
}

/// A refusal as the plugin's wording reports it: a webhook's as kube-apiserver reports it
/// (its name, then its message, with its code; a code below 400 becomes 400), with the
/// warnings of the plugins before it and its own.
fn refused(
    plugin: &AdmissionPlugin,
    request: &AdmissionRequest,
    subject: &Value,
    refusal: Refusal,
    mut warnings: Vec<String>,
) -> ApiError {
    match plugin.wording {
        Wording::Webhook => {
            let message = format!(
                "admission webhook \"{}\" denied the request: {}",
                plugin.name, refusal.message
            );
            warnings.extend(refusal.warnings);
            ApiError::Refused {
                code: refusal.code,
                message,
                warnings,
            }
        }
        Wording::Forbidden => {
            let name = object::name(subject);
            let name = if name.is_empty() { "Unknown" } else { name };
            ApiError::Forbidden(format!(
                "{} \"{name}\" is forbidden: {}",
                request.resource.qualified_name(),
                refusal.message
            ))
        }
        Wording::InvalidObject => ApiError::Invalid {
            kind: request.resource.kind.clone(),
            name: object::name(subject).to_string(),
            message: refusal.message,
        },
    }
}
