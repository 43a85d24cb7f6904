//! CDI's clone authorization on the platform (the rules are admission's,
//! `admission::cdi::clone_auth`): the clone token put on an authorized DataVolume, and the
//! embedded API server's admission plugin that checks its creator's permissions and puts the
//! token on. CDI's webhook server (`cdi.rs`) does the same over a kube client.

use admission::cdi::clone_auth::{
    CDI_GROUP, CloneSource, DeclaredSource, Permission, WEBHOOK, declared_source, denial,
    source_of, sufficient_permissions,
};
use serde_json::Value;
use standalone::apiserver::{
    AdmissionPlugin, Operation, Refusal, ResourceAttributes, Resources, Wording,
};
use uploadproxy::UploadTokenIssuer;
use uploadproxy::token::CLONE_TOKEN_ANNOTATION;

/// Puts a clone token for `source` into `target_namespace`/(the object's name) on a
/// DataVolume object.
pub fn add_token(
    dv: &mut Value,
    issuer: &UploadTokenIssuer,
    source: &CloneSource,
    target_namespace: &str,
) -> Result<(), String> {
    let name = dv["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let token = issuer
        .issue_clone((&source.namespace, &source.name), (target_namespace, &name))
        .map_err(|err| err.to_string())?;
    let Some(object) = dv.as_object_mut() else {
        return Err("a DataVolume must be a JSON object".into());
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let annotations = metadata
        .as_object_mut()
        .ok_or("metadata must be an object")?
        .entry("annotations")
        .or_insert_with(|| Value::Object(Default::default()));
    annotations
        .as_object_mut()
        .ok_or("metadata.annotations must be an object")?
        .insert(CLONE_TOKEN_ANNOTATION.into(), Value::String(token));
    Ok(())
}

/// The embedded API server's admission plugin that authorizes clones as they are created
/// and puts tokens from `issuer` on them.
pub fn clone_authorization(issuer: std::sync::Arc<UploadTokenIssuer>) -> AdmissionPlugin {
    let datavolumes = Resources::One {
        group: CDI_GROUP.into(),
        plural: "datavolumes".into(),
    };
    let mut plugin = AdmissionPlugin::mutating(
        WEBHOOK,
        datavolumes,
        Wording::Webhook,
        Box::new(move |request, object| {
            let namespace = request.namespace;
            let source = match declared_source(object, namespace) {
                DeclaredSource::None => None,
                DeclaredSource::Direct(source) => Some(source),
                DeclaredSource::DataSource(namespace, name) => request
                    .get(CDI_GROUP, "datasources", &namespace, &name)?
                    .and_then(|ds| source_of(&ds["spec"]["source"], &namespace)),
            };
            // Not a clone, a clone within the namespace, or a DataSource not there yet
            // (the controller refuses to clone across namespaces without a token).
            let Some(source) = source.filter(|s| s.namespace != namespace) else {
                return Ok(Vec::new());
            };
            let mut allowed = false;
            for set in sufficient_permissions(&source) {
                if set.iter().try_fold(true, |all, a| {
                    Ok::<_, Refusal>(all && request.allows(&attributes(a))?)
                })? {
                    allowed = true;
                    break;
                }
            }
            if !allowed {
                return Err(Refusal::denied(denial(request.user_name(), &source)));
            }
            let added = add_token(object, &issuer, &source, namespace);
            added.map_err(|err| Refusal::new(500, err))?;
            Ok(Vec::new())
        }),
    );
    plugin.operations = vec![Operation::Create];
    plugin
}

/// A permission of CDI's rule as the embedded API server's authorizer asks about it.
fn attributes(permission: &Permission) -> ResourceAttributes {
    ResourceAttributes {
        verb: permission.verb.clone(),
        group: permission.group.clone(),
        resource: permission.resource.clone(),
        subresource: permission.subresource.clone(),
        namespace: permission.namespace.clone(),
        name: permission.name.clone(),
    }
}
