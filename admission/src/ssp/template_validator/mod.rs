//! SSP's virt-template-validator as pure functions: the validation rules a VM carries
//! (annotation `vm.kubevirt.io/validations`) or inherits from the template it was made from
//! (annotation `validations` of the Template its labels name), applied to the VM as
//! kubevirt/ssp-operator's `internal/template-validator` applies them, with its messages; and
//! its check on deleting a template that VMs still validate against.
//!
//! Upstream only logs a failed `justWarning` rule; here it also becomes an admission warning.

mod eval;
mod path;
mod rules;
mod shape;

#[cfg(test)]
mod tests;

use serde_json::{Value, json};

pub use eval::{Outcome, RuleError};
pub use path::{JSONPATH_PREFIX, PathError, RulePath};
pub use rules::{IntOrPath, Rule, RulesError, StringOrPath, parse_rules};

/// The VM's own rules, used instead of its template's.
pub const VALIDATIONS_ANNOTATION: &str = "vm.kubevirt.io/validations";
/// A template's rules.
pub const TEMPLATE_VALIDATIONS_ANNOTATION: &str = "validations";
/// Present on a VM (any value): its rules are not checked.
pub const SKIP_VALIDATIONS_ANNOTATION: &str = "vm.kubevirt.io/skip-validations";
/// The name of the VM's template, a label (or, failing a usable label, an annotation).
pub const TEMPLATE_NAME_KEY: &str = "vm.kubevirt.io/template";
/// The namespace of the VM's template.
pub const TEMPLATE_NAMESPACE_KEY: &str = "vm.kubevirt.io/template.namespace";
/// The namespace of the VM's template as older VMs spell it.
pub const TEMPLATE_NAMESPACE_OLD_KEY: &str = "vm.kubevirt.io/template-namespace";
/// Marks a common template; only those are guarded against deletion.
pub const TEMPLATE_TYPE_LABEL: &str = "template.kubevirt.io/type";
/// Where the webhook reviews VirtualMachines.
pub const VM_VALIDATE_PATH: &str = "/virtualmachine-validate";
/// Where the webhook reviews Template deletions.
pub const TEMPLATE_VALIDATE_PATH: &str = "/template-validate";
/// The ValidatingWebhookConfiguration (and Service) SSP names after the validator.
pub const WEBHOOK_CONFIGURATION: &str = "virt-template-validator";
/// The webhook of that configuration for VirtualMachines.
pub const VM_WEBHOOK: &str = "virtualmachine-admission.ssp.kubevirt.io";
/// The webhook of that configuration for Templates.
pub const TEMPLATE_WEBHOOK: &str = "template-admission.ssp.kubevirt.io";

/// One failed rule of a denial: the rule's path and `"<rule message>: <what was found>"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub field: String,
    pub message: String,
}

/// What the validator decides about a VM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Every failed rule when the VM is refused (upstream lists failed `justWarning` rules
    /// here too once something else refuses the VM).
    pub denials: Vec<Denial>,
    /// Failed `justWarning` rules, as admission warnings.
    pub warnings: Vec<String>,
    /// The rule set does not decode: the VM is refused with this message (HTTP 400).
    pub bad_request: Option<String>,
}

impl Verdict {
    /// The VM may be stored.
    pub fn allowed(&self) -> bool {
        self.denials.is_empty() && self.bad_request.is_none()
    }

    /// Upstream's message: the decoding error, or the denials' messages joined by ", ".
    pub fn message(&self) -> Option<String> {
        if let Some(message) = &self.bad_request {
            return Some(message.clone());
        }
        if self.denials.is_empty() {
            return None;
        }
        let messages: Vec<&str> = self.denials.iter().map(|d| d.message.as_str()).collect();
        Some(messages.join(", "))
    }

    /// The HTTP code of a refusal: 400 for rules that do not decode, 422 for failed rules.
    pub fn code(&self) -> Option<u16> {
        match (&self.bad_request, self.denials.is_empty()) {
            (Some(_), _) => Some(400),
            (None, false) => Some(422),
            (None, true) => None,
        }
    }

    /// The `metav1.Status` of a refusal as upstream's AdmissionResponse carries it.
    pub fn status(&self) -> Option<Value> {
        let message = self.message()?;
        if self.bad_request.is_some() {
            return Some(json!({"message": message, "code": 400}));
        }
        let causes: Vec<Value> = self.denials.iter().map(cause).collect();
        Some(json!({
            "message": message,
            "reason": "Invalid",
            "code": 422,
            "details": {"causes": causes},
        }))
    }
}

fn cause(denial: &Denial) -> Value {
    let mut cause = json!({"reason": "FieldValueInvalid", "message": denial.message});
    if !denial.field.is_empty() {
        cause["field"] = json!(denial.field);
    }
    cause
}

fn annotations(object: &Value) -> Option<&serde_json::Map<String, Value>> {
    object["metadata"]["annotations"].as_object()
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    annotations(object)?.get(key)?.as_str()
}

/// The `(namespace, name)` of the template a VM was made from: from its labels when they name
/// both, else from its annotations (the namespace under its current key, else the old one).
pub fn template_of(vm: &Value) -> Option<(String, String)> {
    ["labels", "annotations"].into_iter().find_map(|map| {
        let map = vm["metadata"][map].as_object()?;
        let get = |key: &str| map.get(key).and_then(Value::as_str).unwrap_or_default();
        let name = get(TEMPLATE_NAME_KEY);
        let namespace = Some(get(TEMPLATE_NAMESPACE_KEY))
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| get(TEMPLATE_NAMESPACE_OLD_KEY));
        (!name.is_empty() && !namespace.is_empty()).then(|| (namespace.to_owned(), name.to_owned()))
    })
}

/// The template whose rules [`review_vm`] needs: none for a VM being deleted, one that skips
/// validation, or one with rules of its own.
pub fn template_needed(vm: &Value) -> Option<(String, String)> {
    let own_rules = annotation(vm, VALIDATIONS_ANNOTATION).is_some_and(|r| !r.is_empty());
    if is_deleting(vm) || skips_validation(vm) || own_rules {
        return None;
    }
    template_of(vm)
}

fn is_deleting(vm: &Value) -> bool {
    !vm["metadata"]["deletionTimestamp"].is_null()
}

fn skips_validation(vm: &Value) -> bool {
    annotations(vm).is_some_and(|a| a.contains_key(SKIP_VALIDATIONS_ANNOTATION))
}

/// Reviews a VM (created or updated) against its rules: its own, or else those of
/// `template`, the Template [`template_needed`] names (`None` when it names none or the
/// template does not exist: nothing to check, as upstream).
pub fn review_vm(vm: &Value, template: Option<&Value>) -> Verdict {
    if is_deleting(vm) || skips_validation(vm) {
        return Verdict::default();
    }
    let text = match annotation(vm, VALIDATIONS_ANNOTATION).filter(|r| !r.is_empty()) {
        Some(own) => own,
        None => template
            .and_then(|t| annotation(t, TEMPLATE_VALIDATIONS_ANNOTATION))
            .unwrap_or_default(),
    };
    let rules = match parse_rules(text) {
        Ok(rules) => rules,
        Err(err) => {
            return Verdict {
                bad_request: Some(err.to_string()),
                ..Verdict::default()
            };
        }
    };
    if rules.is_empty() {
        return Verdict::default();
    }
    verdict(&eval::evaluate(&rules, &with_cpu_defaults(vm)))
}

/// Upstream defaults a CPU's zero sockets, cores and threads to 1 before the rules see them.
fn with_cpu_defaults(vm: &Value) -> Value {
    let mut vm = vm.clone();
    if let Some(cpu) = vm
        .pointer_mut("/spec/template/spec/domain/cpu")
        .and_then(Value::as_object_mut)
    {
        for key in ["sockets", "cores", "threads"] {
            let unset = cpu.get(key).is_none_or(|v| v.is_null() || *v == json!(0));
            if unset {
                cpu.insert(key.to_owned(), json!(1));
            }
        }
    }
    vm
}

fn verdict(reports: &[eval::Report<'_>]) -> Verdict {
    let warnings = reports
        .iter()
        .filter(|r| r.rule.just_warning)
        .filter_map(eval::Report::cause)
        .collect();
    let refused = reports.iter().any(eval::Report::refuses);
    let denials = if refused {
        reports
            .iter()
            .filter_map(|r| {
                Some(Denial {
                    field: r
                        .rule
                        .path
                        .as_ref()
                        .map(|p| p.expr().to_owned())
                        .unwrap_or_default(),
                    message: r.cause()?,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    Verdict {
        denials,
        warnings,
        bad_request: None,
    }
}

/// Reviews the deletion of a Template: a common template (label `template.kubevirt.io/type`)
/// with rules (annotation `validations`) may not go while VMs validate against it, i.e. VMs
/// among `vms` that name it ([`template_of`]) and carry no rules of their own. The refusal
/// is a `metav1.Status` (403, Forbidden) naming those VMs as `namespace/name`.
pub fn review_template_deletion(template: &Value, vms: &[Value]) -> Option<Value> {
    let common = template["metadata"]["labels"]
        .as_object()
        .is_some_and(|l| l.contains_key(TEMPLATE_TYPE_LABEL));
    let with_rules =
        annotations(template).is_some_and(|a| a.contains_key(TEMPLATE_VALIDATIONS_ANNOTATION));
    if !common || !with_rules {
        return None;
    }
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let key = (
        text(&template["metadata"]["namespace"]),
        text(&template["metadata"]["name"]),
    );
    let mut users: Vec<String> = vms
        .iter()
        .filter(|vm| annotation(vm, VALIDATIONS_ANNOTATION).is_none())
        .filter(|vm| template_of(vm).as_ref() == Some(&key))
        .map(|vm| {
            format!(
                "{}/{}",
                text(&vm["metadata"]["namespace"]),
                text(&vm["metadata"]["name"])
            )
        })
        .collect();
    if users.is_empty() {
        return None;
    }
    users.sort();
    let message = format!(
        "Template cannot be deleted, because the following VMs are referencing it for validation: {}",
        users.join(", ")
    );
    Some(json!({"message": message, "reason": "Forbidden", "code": 403}))
}
