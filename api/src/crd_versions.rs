//! Edits of a generated CRD that kube's derive cannot express: older versions served with
//! the current schema, deprecation, the conversion strategy said outright, an optional spec.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, JSON,
};

/// `crd` serving `version` too, with its storage version's schema, subresources and
/// columns, not stored, optionally deprecated with `warning`: upstream's older versions
/// whose schema is the current one, so objects move between them by their `apiVersion`
/// alone (conversion strategy `None`).
pub fn also_served(
    mut crd: CustomResourceDefinition,
    version: &str,
    warning: Option<&str>,
) -> CustomResourceDefinition {
    let stored = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .cloned()
        .expect("a CRD has a storage version");
    let mut older = stored;
    older.name = version.to_owned();
    older.storage = false;
    crd.spec.versions.push(older);
    match warning {
        Some(warning) => deprecated(crd, version, warning),
        None => crd,
    }
}

/// `crd` with `version` marked deprecated, kube-apiserver warning `warning` on its use.
pub fn deprecated(
    mut crd: CustomResourceDefinition,
    version: &str,
    warning: &str,
) -> CustomResourceDefinition {
    for served in crd.spec.versions.iter_mut().filter(|v| v.name == version) {
        served.deprecated = Some(true);
        served.deprecation_warning = Some(warning.to_owned());
    }
    crd
}

/// `crd` with conversion strategy `None` said outright, as upstream's SSP CRD says it.
pub fn conversion_none(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "None".to_owned(),
        webhook: None,
    });
    crd
}

/// `crd` whose objects may leave out `spec` (every version), as upstream's CRD allows. A
/// missing one is defaulted to `{}`, so that the typed clients here (whose `spec` is not
/// optional) read the object as Go reads it, a zero spec.
pub fn spec_optional(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let root = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut());
        if let Some(root) = root {
            if let Some(required) = root.required.as_mut() {
                required.retain(|field| field != "spec");
            }
            if root.required.as_ref().is_some_and(Vec::is_empty) {
                root.required = None;
            }
            let spec = root.properties.as_mut().and_then(|p| p.get_mut("spec"));
            if let Some(spec) = spec {
                spec.default = Some(JSON(serde_json::json!({})));
            }
        }
    }
    crd
}
