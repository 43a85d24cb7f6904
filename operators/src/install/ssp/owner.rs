//! How the SSP operator marks what it deploys: the `app.kubernetes.io` labels of its
//! operands, and the owner annotations of operator-lib (`operator-sdk/primary-resource*`)
//! that stand for an owner reference across namespaces.

use std::collections::BTreeMap;

use api::ssp::SSP;
use kube::ResourceExt;
use serde_json::Value;

/// `app.kubernetes.io/name`: the operand.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// `app.kubernetes.io/component`: the operand's component.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// `app.kubernetes.io/managed-by`: always `ssp-operator`.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// `app.kubernetes.io/part-of`, copied from the SSP.
pub const PART_OF_LABEL: &str = "app.kubernetes.io/part-of";
/// `app.kubernetes.io/version`, copied from the SSP.
pub const VERSION_LABEL: &str = "app.kubernetes.io/version";
/// The value of the managed-by label.
pub const MANAGED_BY: &str = "ssp-operator";
/// The component of the templates and boot sources.
pub const COMPONENT_TEMPLATING: &str = "templating";
/// The owner's `namespace/name`.
pub const PRIMARY_RESOURCE: &str = "operator-sdk/primary-resource";
/// The owner's `Kind.group`.
pub const PRIMARY_RESOURCE_TYPE: &str = "operator-sdk/primary-resource-type";
/// The owner's kind and group as operator-lib writes them.
pub const SSP_TYPE: &str = "SSP.ssp.kubevirt.io";

/// The labels of an object of operand `name` deployed for `ssp`: the app labels, and the SSP's
/// `part-of` and `version` labels (empty when the SSP has labels but not these, as upstream).
pub fn app_labels(ssp: &SSP, name: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let own = ssp.labels();
    if !own.is_empty() {
        for key in [PART_OF_LABEL, VERSION_LABEL] {
            labels.insert(key.to_owned(), own.get(key).cloned().unwrap_or_default());
        }
    }
    labels.insert(NAME_LABEL.to_owned(), name.to_owned());
    labels.insert(COMPONENT_LABEL.to_owned(), COMPONENT_TEMPLATING.to_owned());
    labels.insert(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned());
    labels
}

/// The owner annotations naming `ssp`.
pub fn owner_annotations(ssp: &SSP) -> BTreeMap<String, String> {
    BTreeMap::from([
        (PRIMARY_RESOURCE.to_owned(), owner_key(ssp)),
        (PRIMARY_RESOURCE_TYPE.to_owned(), SSP_TYPE.to_owned()),
    ])
}

/// `namespace/name` of `ssp`.
pub fn owner_key(ssp: &SSP) -> String {
    format!("{}/{}", ssp.namespace().unwrap_or_default(), ssp.name_any())
}

/// Whether `object` (any JSON object) carries the owner annotations of the SSP `owner_key`.
pub fn is_owned_by(object: &Value, owner_key: &str) -> bool {
    let annotations = &object["metadata"]["annotations"];
    annotations[PRIMARY_RESOURCE_TYPE] == SSP_TYPE && annotations[PRIMARY_RESOURCE] == owner_key
}

/// The SSP (`namespace`, `name`) that `annotations` name as owner, if any.
pub fn owner_of(annotations: &BTreeMap<String, String>) -> Option<(String, String)> {
    if annotations.get(PRIMARY_RESOURCE_TYPE).map(String::as_str) != Some(SSP_TYPE) {
        return None;
    }
    let (namespace, name) = annotations.get(PRIMARY_RESOURCE)?.split_once('/')?;
    Some((namespace.to_owned(), name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ssp(labels: Value) -> SSP {
        serde_json::from_value(json!({
            "apiVersion": "ssp.kubevirt.io/v1beta2", "kind": "SSP",
            "metadata": {"name": "ssp", "namespace": "kubevirt", "labels": labels},
            "spec": {"commonTemplates": {"namespace": "openshift"}},
        }))
        .unwrap()
    }

    #[test]
    fn labels_name_the_operand_and_copy_the_ssps_part_of_and_version() {
        let bare = app_labels(&ssp(json!({})), "common-templates");
        assert_eq!(bare.len(), 3);
        assert_eq!(bare[NAME_LABEL], "common-templates");
        assert_eq!(bare[COMPONENT_LABEL], "templating");
        assert_eq!(bare[MANAGED_BY_LABEL], "ssp-operator");
        let labelled = app_labels(
            &ssp(json!({PART_OF_LABEL: "hyperconverged-cluster", "other": "x"})),
            "data-sources",
        );
        assert_eq!(labelled[PART_OF_LABEL], "hyperconverged-cluster");
        assert_eq!(labelled[VERSION_LABEL], "");
        assert!(!labelled.contains_key("other"));
    }

    #[test]
    fn ownership_is_read_back_from_the_annotations() {
        let owner = ssp(json!({}));
        let annotations = owner_annotations(&owner);
        assert_eq!(annotations[PRIMARY_RESOURCE], "kubevirt/ssp");
        assert_eq!(
            owner_of(&annotations),
            Some(("kubevirt".into(), "ssp".into()))
        );
        let object = json!({"metadata": {"annotations": annotations}});
        assert!(is_owned_by(&object, "kubevirt/ssp"));
        assert!(!is_owned_by(&object, "kubevirt/other"));
        assert!(!is_owned_by(&json!({"metadata": {}}), "kubevirt/ssp"));
    }
}
