//! PriorityClass (`scheduling.k8s.io/v1`) as kube-apiserver keeps it: the system classes
//! every cluster has, the defaults of a new class, and the validation of its strategy
//! (`pkg/apis/scheduling/validation`), each error worded as kube-apiserver words it. The
//! Priority admission plugin, which resolves a pod's priority from its class, is
//! `admission/priority.rs`.

use serde_json::{Value, json};

pub const GROUP: &str = "scheduling.k8s.io";
pub const KIND: &str = "PriorityClass";
pub const PLURAL: &str = "priorityclasses";

/// The prefix of the names kept for the system classes.
pub const SYSTEM_PREFIX: &str = "system-";
/// The highest value a class other than a system class may have.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;
/// The value of `system-cluster-critical`; `system-node-critical` is 1000 above it.
pub const SYSTEM_CRITICAL_PRIORITY: i64 = 2 * HIGHEST_USER_DEFINABLE_PRIORITY;
/// The preemption policy of a class (and of a pod) that names none.
pub const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";
const PREEMPTION_POLICIES: [&str; 2] = [PREEMPT_LOWER_PRIORITY, "Never"];

/// A system class: its name, value and description, as kube-apiserver creates it at start.
struct SystemClass {
    name: &'static str,
    value: i64,
    description: &'static str,
}

const SYSTEM_CLASSES: [SystemClass; 2] = [
    SystemClass {
        name: "system-node-critical",
        value: SYSTEM_CRITICAL_PRIORITY + 1000,
        description: "Used for system critical pods that must not be moved from their current node.",
    },
    SystemClass {
        name: "system-cluster-critical",
        value: SYSTEM_CRITICAL_PRIORITY,
        description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    },
];

/// The system classes, as objects to create when the server starts.
pub fn system_classes() -> Vec<Value> {
    SYSTEM_CLASSES
        .iter()
        .map(|class| {
            json!({
                "apiVersion": "scheduling.k8s.io/v1", "kind": KIND,
                "metadata": {"name": class.name},
                "value": class.value,
                "description": class.description,
                "preemptionPolicy": PREEMPT_LOWER_PRIORITY,
            })
        })
        .collect()
}

/// Gives a class the defaults of its Go type: `value` 0 when left out (Go's zero, always
/// written), and `preemptionPolicy: PreemptLowerPriority`.
pub fn set_defaults(class: &mut Value) {
    let Some(fields) = class.as_object_mut() else {
        return;
    };
    fields.entry("value").or_insert(json!(0));
    fields
        .entry("preemptionPolicy")
        .or_insert(json!(PREEMPT_LOWER_PRIORITY));
}

/// The value of a class (0, Go's zero, when left out).
pub fn value(class: &Value) -> i64 {
    class["value"].as_i64().unwrap_or(0)
}

/// Whether a class is marked the default of pods that name none.
pub fn is_global_default(class: &Value) -> bool {
    class["globalDefault"].as_bool().unwrap_or(false)
}

/// kube-apiserver's errors of a class `group`/`kind` (none for another kind), and of its
/// update from `old`.
pub fn validate(group: &str, kind: &str, class: &Value, old: Option<&Value>) -> Vec<String> {
    if (group, kind) != (GROUP, KIND) {
        return Vec::new();
    }
    let mut errors = validate_class(class);
    if let Some(old) = old {
        errors.extend(validate_update(class, old));
    }
    errors
}

/// `ValidatePriorityClass`: a `system-` name only for a system class as it is; a value no
/// higher than [`HIGHEST_USER_DEFINABLE_PRIORITY`] for any other; a known preemption policy.
fn validate_class(class: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let name = class["metadata"]["name"].as_str().unwrap_or_default();
    if name.starts_with(SYSTEM_PREFIX) {
        if let Err(reason) = known_system_class(name, value(class), is_global_default(class)) {
            errors.push(format!(
                "metadata.name: Forbidden: priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {reason}"
            ));
        }
    } else if value(class) > HIGHEST_USER_DEFINABLE_PRIORITY {
        errors.push(format!(
            "value: Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
        ));
    }
    match &class["preemptionPolicy"] {
        Value::Null => {}
        Value::String(policy) if policy.is_empty() => {
            errors.push("preemptionPolicy: Required value".to_owned());
        }
        Value::String(policy) if PREEMPTION_POLICIES.contains(&policy.as_str()) => {}
        other => errors.push(format!(
            "preemptionPolicy: Unsupported value: {other}: supported values: \"{}\", \"{}\"",
            PREEMPTION_POLICIES[0], PREEMPTION_POLICIES[1]
        )),
    }
    errors
}

/// `ValidatePriorityClassUpdate`: neither the value nor the preemption policy changes.
fn validate_update(class: &Value, old: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    if value(class) != value(old) {
        errors.push("value: Forbidden: may not be changed in an update.".to_owned());
    }
    let policy = &class["preemptionPolicy"];
    if *policy != old["preemptionPolicy"] {
        errors.push(format!(
            "preemptionPolicy: Invalid value: {}: field is immutable",
            shown(policy)
        ));
    }
    errors
}

/// `IsKnownSystemPriorityClass`: whether `name` is a system class with its own value and
/// globalDefault, or why not.
fn known_system_class(name: &str, value: i64, global_default: bool) -> Result<(), String> {
    let Some(class) = SYSTEM_CLASSES.iter().find(|class| class.name == name) else {
        return Err(format!("{name} is not a known system priority class"));
    };
    if class.value != value {
        return Err(format!(
            "value of {name} PriorityClass must be {}",
            class.value
        ));
    }
    if global_default {
        return Err(format!(
            "globalDefault of {name} PriorityClass must be false"
        ));
    }
    Ok(())
}

/// A value as kube-apiserver's field errors quote it.
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, value: i64) -> Value {
        json!({"metadata": {"name": name}, "value": value})
    }

    #[test]
    fn a_user_class_is_at_most_one_billion() {
        assert!(validate(GROUP, KIND, &class("high", 1_000_000_000), None).is_empty());
        assert_eq!(
            validate(GROUP, KIND, &class("higher", 1_000_000_001), None),
            ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
        );
    }

    #[test]
    fn system_names_are_reserved_for_the_system_classes_as_they_are() {
        for system in system_classes() {
            assert!(validate(GROUP, KIND, &system, None).is_empty(), "{system}");
        }
        assert_eq!(
            validate(GROUP, KIND, &class("system-mine", 10), None),
            [
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"
            ]
        );
        assert_eq!(
            validate(GROUP, KIND, &class("system-node-critical", 10), None),
            [
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-node-critical PriorityClass must be 2000001000"
            ]
        );
        let mut default = class("system-cluster-critical", 2_000_000_000);
        default["globalDefault"] = json!(true);
        assert_eq!(
            validate(GROUP, KIND, &default, None),
            [
                "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: globalDefault of system-cluster-critical PriorityClass must be false"
            ]
        );
    }

    #[test]
    fn value_and_preemption_policy_are_immutable() {
        let mut old = class("high", 10);
        set_defaults(&mut old);
        let mut raised = old.clone();
        raised["value"] = json!(11);
        raised["preemptionPolicy"] = json!("Never");
        assert_eq!(
            validate(GROUP, KIND, &raised, Some(&old)),
            [
                "value: Forbidden: may not be changed in an update.",
                "preemptionPolicy: Invalid value: \"Never\": field is immutable"
            ]
        );
        let mut described = old.clone();
        described["description"] = json!("for the important ones");
        assert!(validate(GROUP, KIND, &described, Some(&old)).is_empty());
    }

    #[test]
    fn preemption_policy_is_one_of_two_and_defaults_to_preempting() {
        let mut odd = class("odd", 1);
        odd["preemptionPolicy"] = json!("Sometimes");
        assert_eq!(
            validate(GROUP, KIND, &odd, None),
            [
                "preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \"PreemptLowerPriority\", \"Never\""
            ]
        );
        let mut bare = json!({"metadata": {"name": "bare"}});
        set_defaults(&mut bare);
        assert_eq!(bare["value"], 0);
        assert_eq!(bare["preemptionPolicy"], PREEMPT_LOWER_PRIORITY);
    }

    #[test]
    fn other_kinds_are_not_judged() {
        assert!(validate("", "Pod", &class("system-x", 5), None).is_empty());
    }
}
