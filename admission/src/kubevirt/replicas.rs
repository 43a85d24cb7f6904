//! Validation of VirtualMachineInstanceReplicaSets and VirtualMachinePools as virt-api's
//! webhooks do it (`ValidateVMIRSSpec`, `ValidateVMPoolSpec`): a template is required, the
//! selector must be valid and select the template's labels, the template itself is
//! validated as a VMI's or a VM's, and a pool's `maxUnavailable` must be a positive count
//! or a percentage from 1 to 100. The messages are upstream's.

use api::kubevirt::VirtualMachineInstanceReplicaSet;
use api::kubevirt::vm::VirtualMachine;
use api::pool::VirtualMachinePool;
use api::validation::{FieldPath, Problem, ValidationError, ValidationResult};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::validate::{validate_instance_spec, validate_virtual_machine};

fn invalid(field: FieldPath, message: &str) -> ValidationResult {
    Err(ValidationError::new(
        field,
        Problem::Invalid(message.to_owned()),
    ))
}

/// The selector is valid and selects the template's labels.
fn check_selector(
    selector: Option<&LabelSelector>,
    template: Option<&ObjectMeta>,
    field: FieldPath,
) -> ValidationResult {
    let selector = selector.cloned().unwrap_or_default();
    if !api::label_selector::is_valid(&selector) {
        return invalid(field, "invalid label selector.");
    }
    let labels = template.and_then(|m| m.labels.clone()).unwrap_or_default();
    if !api::label_selector::selects(&selector, &labels) {
        return invalid(field, "selector does not match labels.");
    }
    Ok(())
}

/// Validates a VirtualMachineInstanceReplicaSet.
pub fn validate_replica_set(rs: &VirtualMachineInstanceReplicaSet) -> ValidationResult {
    let spec = FieldPath::new("spec");
    let Some(template) = &rs.spec.template else {
        return Err(ValidationError::new(
            spec.child("template"),
            Problem::Invalid("missing virtual machine template.".into()),
        ));
    };
    let instance = template.spec.clone().unwrap_or_default();
    validate_instance_spec(&instance, &spec.child("template").child("spec"))?;
    check_selector(
        rs.spec.selector.as_ref(),
        template.metadata.as_ref(),
        spec.child("selector"),
    )
}

/// Validates a VirtualMachinePool; `old` is the pool an update replaces, whose selector
/// may not change.
pub fn validate_pool(
    pool: &VirtualMachinePool,
    old: Option<&VirtualMachinePool>,
) -> ValidationResult {
    let spec = FieldPath::new("spec");
    let Some(template) = &pool.spec.virtual_machine_template else {
        return Err(ValidationError::new(
            spec.child("template"),
            Problem::Invalid("missing virtual machine template.".into()),
        ));
    };
    let vm = VirtualMachine {
        metadata: ObjectMeta::default(),
        spec: template.spec.clone().unwrap_or_default(),
        status: None,
    };
    validate_virtual_machine(&vm).map_err(|e| {
        let field = FieldPath::new(&format!("spec.virtualMachineTemplate.{}", e.field));
        ValidationError::new(field, e.problem)
    })?;
    check_selector(
        pool.spec.selector.as_ref(),
        template.metadata.as_ref(),
        spec.child("selector"),
    )?;
    check_max_unavailable(
        pool.spec.max_unavailable.as_ref(),
        spec.child("maxUnavailable"),
    )?;
    if let Some(old) = old
        && old.spec.selector != pool.spec.selector
    {
        return invalid(
            spec.child("selector"),
            "selector is immutable after creation.",
        );
    }
    Ok(())
}

fn check_max_unavailable(value: Option<&IntOrString>, field: FieldPath) -> ValidationResult {
    match value {
        None => Ok(()),
        Some(IntOrString::Int(n)) if *n <= 0 => {
            invalid(field, "maxUnavailable must be greater than 0")
        }
        Some(IntOrString::Int(_)) => Ok(()),
        Some(IntOrString::String(text)) => {
            let Some(percentage) = text.strip_suffix('%') else {
                return invalid(field, "maxUnavailable percentage must end with %");
            };
            match percentage.parse::<i64>() {
                Err(e) => invalid(
                    field,
                    &format!("maxUnavailable percentage value {percentage:?} is invalid: {e}"),
                ),
                Ok(n) if !(1..=100).contains(&n) => invalid(
                    field,
                    &format!("maxUnavailable percentage value {n} must be between 1 and 100"),
                ),
                Ok(_) => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn replica_set(selector: serde_json::Value) -> VirtualMachineInstanceReplicaSet {
        serde_json::from_value(
            json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceReplicaSet",
            "metadata": {"name": "rs"},
            "spec": {"selector": selector, "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"domain": {"devices": {}}}}}}),
        )
        .unwrap()
    }

    fn pool(selector: serde_json::Value, max_unavailable: serde_json::Value) -> VirtualMachinePool {
        serde_json::from_value(json!({"apiVersion": "pool.kubevirt.io/v1alpha1", "kind": "VirtualMachinePool",
            "metadata": {"name": "p"},
            "spec": {"selector": selector, "maxUnavailable": max_unavailable,
                     "virtualMachineTemplate": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"devices": {}}}}}}}}))
        .unwrap()
    }

    #[test]
    fn a_selector_missing_the_template_labels_is_refused_with_upstreams_words() {
        let refused = validate_replica_set(&replica_set(json!({"matchLabels": {"app": "db"}})));
        let text = refused.unwrap_err().to_string();
        assert!(
            text.contains("spec.selector") && text.contains("selector does not match labels."),
            "{text}"
        );
        assert!(validate_replica_set(&replica_set(json!({"matchLabels": {"app": "web"}}))).is_ok());
        let refused = validate_pool(
            &pool(json!({"matchLabels": {"app": "db"}}), json!(null)),
            None,
        );
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("selector does not match labels.")
        );
    }

    #[test]
    fn a_pools_max_unavailable_and_selector_change_are_checked() {
        let selector = json!({"matchLabels": {"app": "web"}});
        let message = |value| {
            validate_pool(&pool(selector.clone(), value), None)
                .unwrap_err()
                .to_string()
        };
        assert!(message(json!("50")).contains("maxUnavailable percentage must end with %"));
        assert!(message(json!("0%")).contains("must be between 1 and 100"));
        assert!(message(json!(0)).contains("maxUnavailable must be greater than 0"));
        assert!(validate_pool(&pool(selector.clone(), json!("25%")), None).is_ok());
        let old = pool(json!({}), json!(null));
        let text = validate_pool(&pool(selector, json!(null)), Some(&old))
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("selector is immutable after creation."),
            "{text}"
        );
    }
}
