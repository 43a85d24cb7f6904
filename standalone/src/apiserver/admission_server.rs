//! The server's objects as its admission plugins see them (admission's [`Server`]): reads,
//! the authorizer's answers, and dry runs through the whole write path. Apart from both
//! `objects` and `admission`, as it names both (and the authorizer, which reads objects).

use serde_json::Value;

use super::admission::{DRY_RUN, Server};
use super::authz::Authorizer;
use super::errors::ApiError;
use super::identity::{ResourceAttributes, UserInfo};
use super::object::UpdateTarget;
use super::objects::{ListOptions, Objects};
use super::resources::ResourceType;
use super::selector::LabelSelector;

impl Server for Objects {
    fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, ApiError> {
        let Some(rt) = self.registry.find_plural(group, plural) else {
            return Ok(None);
        };
        let namespace = if rt.namespaced { namespace } else { "" };
        self.store.get(&rt.storage_key(), namespace, name)
    }

    fn list_selected(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        selector: &str,
        limit: usize,
    ) -> Result<Vec<Value>, ApiError> {
        let Some(rt) = self.registry.find_plural(group, plural) else {
            return Ok(Vec::new());
        };
        let options = ListOptions {
            labels: LabelSelector::parse(selector)?,
            limit: Some(limit),
            ..Default::default()
        };
        Ok(self.list(&rt, namespace, &options)?.items)
    }

    fn allows(&self, user: &UserInfo, attributes: &ResourceAttributes) -> Result<bool, ApiError> {
        Authorizer::new(self).allows(user, attributes)
    }

    fn dry_run_create(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        object: &Value,
    ) -> Result<Vec<String>, ApiError> {
        let rt = served(self, group, plural)?;
        let version = version_of(object);
        let body = object.clone();
        Ok(self
            .create_as(DRY_RUN, &rt, version, namespace, body)?
            .warnings)
    }

    fn dry_run_update(
        &self,
        group: &str,
        plural: &str,
        object: &Value,
    ) -> Result<Vec<String>, ApiError> {
        let rt = served(self, group, plural)?;
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let version = version_of(object);
        let (body, main) = (object.clone(), UpdateTarget::Main);
        let written = self.update_as(DRY_RUN, &rt, version, namespace, name, body, main)?;
        Ok(written.warnings)
    }
}

fn served(objects: &Objects, group: &str, plural: &str) -> Result<ResourceType, ApiError> {
    (objects.registry)
        .find_plural(group, plural)
        .ok_or(ApiError::NoSuchResource)
}

/// The version of an object's `apiVersion` (`apps/v1` is `v1`).
fn version_of(object: &Value) -> &str {
    object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or_default()
}
