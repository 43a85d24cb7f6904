//! kube-apiserver's validation of where a pod may run: the `nodeSelector`, node affinity and
//! `tolerations` of the pod specs of the built-in kinds (a Pod's own, a workload's
//! template). It is the part of Kubernetes' pod validation that a placement copied from an
//! operator's CR reaches, which is why virt-operator and HCO have the API server judge a
//! placement by dry-run-creating a workload that carries it. Each error reads as
//! kube-apiserver words it: `path: Invalid value: "x": detail`.

use serde_json::Value;

/// The placement errors of `object`, a `kind` of `group`; none for other kinds.
pub fn validate(group: &str, kind: &str, object: &Value) -> Vec<String> {
    let Some(path) = pod_spec_path(group, kind) else {
        return Vec::new();
    };
    let spec = path.split('.').fold(object, |value, field| &value[field]);
    let mut errors = Errors::default();
    node_selector(&mut errors, &format!("{path}.nodeSelector"), spec);
    tolerations(&mut errors, &format!("{path}.tolerations"), spec);
    node_affinity(
        &mut errors,
        &format!("{path}.affinity.nodeAffinity"),
        &spec["affinity"]["nodeAffinity"],
    );
    errors.0
}

/// Where the pod spec of a built-in kind is.
fn pod_spec_path(group: &str, kind: &str) -> Option<&'static str> {
    match (group, kind) {
        ("", "Pod") => Some("spec"),
        ("", "ReplicationController" | "PodTemplate") => Some("spec.template.spec"),
        ("apps", "Deployment" | "DaemonSet" | "StatefulSet" | "ReplicaSet") => {
            Some("spec.template.spec")
        }
        ("batch", "Job") => Some("spec.template.spec"),
        ("batch", "CronJob") => Some("spec.jobTemplate.spec.template.spec"),
        _ => None,
    }
}

/// Field errors in kube-apiserver's words.
#[derive(Default)]
struct Errors(Vec<String>);

impl Errors {
    fn invalid(&mut self, path: &str, value: &Value, detail: &str) {
        self.0
            .push(format!("{path}: Invalid value: {}: {detail}", shown(value)));
    }

    fn unsupported(&mut self, path: &str, value: &Value, supported: &[&str]) {
        let supported: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        self.0.push(format!(
            "{path}: Unsupported value: {}: supported values: {}",
            shown(value),
            supported.join(", ")
        ));
    }

    fn required(&mut self, path: &str, detail: &str) {
        self.0.push(format!("{path}: Required value: {detail}"));
    }

    fn forbidden(&mut self, path: &str, detail: &str) {
        self.0.push(format!("{path}: Forbidden: {detail}"));
    }

    /// A label key (a qualified name) at `path`: one error per thing wrong with it.
    fn label_name(&mut self, path: &str, name: &str) {
        for detail in qualified_name_errors(name) {
            self.invalid(path, &Value::from(name), &detail);
        }
    }
}

/// A value as Go's field errors print it: strings quoted, numbers bare, objects as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::Null => "\"\"".into(),
        other => other.to_string(),
    }
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn node_selector(errors: &mut Errors, path: &str, spec: &Value) {
    let Some(selector) = spec["nodeSelector"].as_object() else {
        return;
    };
    for (key, value) in selector {
        errors.label_name(path, key);
        if let Some(detail) = label_value_error(text(value)) {
            errors.invalid(path, value, &detail);
        }
    }
}

const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn tolerations(errors: &mut Errors, path: &str, spec: &Value) {
    let Some(tolerations) = spec["tolerations"].as_array() else {
        return;
    };
    for (i, toleration) in tolerations.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let (key, operator) = (text(&toleration["key"]), text(&toleration["operator"]));
        let (value, effect) = (text(&toleration["value"]), text(&toleration["effect"]));
        if key.is_empty() {
            if operator != "Exists" {
                errors.invalid(
                    &format!("{at}.operator"),
                    &toleration["operator"],
                    "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
                );
            }
        } else {
            errors.label_name(&format!("{at}.key"), key);
        }
        if !toleration["tolerationSeconds"].is_null() && effect != "NoExecute" {
            errors.invalid(
                &format!("{at}.effect"),
                &toleration["effect"],
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            );
        }
        match operator {
            // kube-apiserver names the operator's path for a bad value, as here.
            "" | "Equal" => {
                if let Some(detail) = label_value_error(value) {
                    errors.invalid(&format!("{at}.operator"), &toleration["value"], &detail);
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errors.invalid(
                        &format!("{at}.operator"),
                        toleration,
                        "value must be empty when `operator` is 'Exists'",
                    );
                }
            }
            _ => errors.unsupported(
                &format!("{at}.operator"),
                &toleration["operator"],
                &["Equal", "Exists"],
            ),
        }
        if !effect.is_empty() && !EFFECTS.contains(&effect) {
            errors.unsupported(&format!("{at}.effect"), &toleration["effect"], &EFFECTS);
        }
    }
}

fn node_affinity(errors: &mut Errors, path: &str, affinity: &Value) {
    let required = &affinity["requiredDuringSchedulingIgnoredDuringExecution"];
    if !required.is_null() {
        let at = format!("{path}.requiredDuringSchedulingIgnoredDuringExecution");
        let terms = required["nodeSelectorTerms"].as_array();
        match terms {
            Some(terms) if !terms.is_empty() => {
                for (i, term) in terms.iter().enumerate() {
                    selector_term(errors, &format!("{at}.nodeSelectorTerms[{i}]"), term);
                }
            }
            _ => errors.required(
                &format!("{at}.nodeSelectorTerms"),
                "must have at least one node selector term",
            ),
        }
    }
    let preferred = affinity["preferredDuringSchedulingIgnoredDuringExecution"].as_array();
    for (i, term) in preferred.into_iter().flatten().enumerate() {
        let at = format!("{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        let weight = term["weight"].as_i64().unwrap_or(0);
        if !(1..=100).contains(&weight) {
            let shown = if term["weight"].is_null() {
                Value::from(0)
            } else {
                term["weight"].clone()
            };
            errors.invalid(
                &format!("{at}.weight"),
                &shown,
                "must be in the range 1-100",
            );
        }
        selector_term(errors, &format!("{at}.preference"), &term["preference"]);
    }
}

fn selector_term(errors: &mut Errors, path: &str, term: &Value) {
    let expressions = term["matchExpressions"].as_array().into_iter().flatten();
    for (i, requirement) in expressions.enumerate() {
        label_requirement(
            errors,
            &format!("{path}.matchExpressions[{i}]"),
            requirement,
        );
    }
    let fields = term["matchFields"].as_array().into_iter().flatten();
    for (i, requirement) in fields.enumerate() {
        field_requirement(errors, &format!("{path}.matchFields[{i}]"), requirement);
    }
}

fn label_requirement(errors: &mut Errors, path: &str, requirement: &Value) {
    let values = requirement["values"].as_array().map_or(0, Vec::len);
    let values_path = format!("{path}.values");
    match text(&requirement["operator"]) {
        "In" | "NotIn" if values == 0 => errors.required(
            &values_path,
            "must be specified when `operator` is 'In' or 'NotIn'",
        ),
        "Exists" | "DoesNotExist" if values > 0 => errors.forbidden(
            &values_path,
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        ),
        "Gt" | "Lt" if values != 1 => errors.required(
            &values_path,
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        ),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        _ => errors.invalid(
            &format!("{path}.operator"),
            &requirement["operator"],
            "not a valid selector operator",
        ),
    }
    errors.label_name(&format!("{path}.key"), text(&requirement["key"]));
}

fn field_requirement(errors: &mut Errors, path: &str, requirement: &Value) {
    match text(&requirement["operator"]) {
        "In" | "NotIn" => {
            if requirement["values"].as_array().map_or(0, Vec::len) != 1 {
                errors.required(
                    &format!("{path}.values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                );
            }
        }
        _ => errors.invalid(
            &format!("{path}.operator"),
            &requirement["operator"],
            "not a valid selector operator",
        ),
    }
    if text(&requirement["key"]) != "metadata.name" {
        errors.invalid(
            &format!("{path}.key"),
            &requirement["key"],
            "not a valid field selector key",
        );
    }
}

const NAME_MAX: usize = 63;
const PREFIX_MAX: usize = 253;
const NAME_FORMAT: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_FORMAT: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const SUBDOMAIN_FORMAT: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Alphanumerics, '-', '_' and '.' inside, alphanumerics at both ends.
fn is_name_part(s: &str) -> bool {
    let inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars().all(inner)
}

/// Lower-case DNS labels joined by dots.
fn is_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let inner = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        let end = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        label.starts_with(end) && label.ends_with(end) && label.chars().all(inner)
    })
}

/// What is wrong with `name` as a qualified name (`[prefix/]name`), in Kubernetes' words.
fn qualified_name_errors(name: &str) -> Vec<String> {
    let parts: Vec<&str> = name.split('/').collect();
    let (prefix, local) = match parts.as_slice() {
        [local] => (None, *local),
        [prefix, local] => (Some(*prefix), *local),
        _ => {
            return vec![format!(
                "a qualified name {NAME_FORMAT} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    let mut errors = Vec::new();
    match prefix {
        Some("") => errors.push("prefix part must be non-empty".to_owned()),
        Some(prefix) => {
            if prefix.len() > PREFIX_MAX {
                errors.push(format!(
                    "prefix part must be no more than {PREFIX_MAX} characters"
                ));
            }
            if !is_subdomain(prefix) {
                errors.push(format!("prefix part {SUBDOMAIN_FORMAT}"));
            }
        }
        None => {}
    }
    if local.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if local.len() > NAME_MAX {
        errors.push(format!(
            "name part must be no more than {NAME_MAX} characters"
        ));
    }
    if !is_name_part(local) {
        errors.push(format!("name part {NAME_FORMAT}"));
    }
    errors
}

/// What is wrong with `value` as a label value, if anything.
fn label_value_error(value: &str) -> Option<String> {
    if value.len() > NAME_MAX {
        return Some(format!("must be no more than {NAME_MAX} characters"));
    }
    (!value.is_empty() && !is_name_part(value)).then(|| LABEL_VALUE_FORMAT.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(pod: Value) -> Value {
        json!({"kind": "Deployment", "spec": {"template": {"spec": pod}}})
    }

    #[test]
    fn a_sound_placement_passes() {
        let pod = json!({
            "nodeSelector": {"kubernetes.io/os": "linux", "disk": ""},
            "tolerations": [
                {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
                {"operator": "Exists"},
                {"key": "dedicated", "value": "virt", "effect": "NoExecute", "tolerationSeconds": 30},
            ],
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                          {"key": "gpu", "operator": "DoesNotExist"},
                                          {"key": "cores", "operator": "Gt", "values": ["4"]}],
                     "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node01"]}]},
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}},
                ],
            }},
        });
        assert_eq!(
            validate("apps", "Deployment", &deployment(pod)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn tolerations_are_judged_as_kube_apiserver_judges_them() {
        let pod = json!({"tolerations": [
            {"key": "a", "operator": "Sometimes"},
            {"operator": "Equal", "value": "x"},
            {"key": "b", "operator": "Exists", "value": "x"},
            {"key": "c", "effect": "NoSchedule", "tolerationSeconds": 5},
            {"key": "d", "effect": "Never"},
            {"key": "e", "value": "not a value"},
        ]});
        let errors = validate("", "Pod", &json!({"spec": pod}));
        assert_eq!(
            errors[0],
            r#"spec.tolerations[0].operator: Unsupported value: "Sometimes": supported values: "Equal", "Exists""#
        );
        assert_eq!(
            errors[1],
            r#"spec.tolerations[1].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, which means "match all values and all keys""#
        );
        assert!(errors[2].starts_with("spec.tolerations[2].operator: Invalid value: {"));
        assert!(errors[2].ends_with(": value must be empty when `operator` is 'Exists'"));
        assert_eq!(
            errors[3],
            r#"spec.tolerations[3].effect: Invalid value: "NoSchedule": effect must be 'NoExecute' when `tolerationSeconds` is set"#
        );
        assert_eq!(
            errors[4],
            r#"spec.tolerations[4].effect: Unsupported value: "Never": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#
        );
        assert!(errors[5].starts_with(
            r#"spec.tolerations[5].operator: Invalid value: "not a value": a valid label must be"#
        ));
        assert_eq!(errors.len(), 6, "{errors:#?}");
    }

    #[test]
    fn node_selectors_and_affinity_are_judged_as_kube_apiserver_judges_them() {
        let pod = json!({
            "nodeSelector": {"bad key": "ok", "Example.com/x": "ok", "k": "-bad"},
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In"},
                                          {"key": "gpu", "operator": "Exists", "values": ["x"]},
                                          {"key": "cores", "operator": "Lt", "values": ["1", "2"]},
                                          {"key": "zone", "operator": "Near"}],
                     "matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["a", "b"]}]},
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}],
            }},
        });
        let errors = validate("apps", "DaemonSet", &deployment(pod));
        let path = "spec.template.spec";
        let required = format!(
            "{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        );
        let expected = [
            format!(
                "{path}.nodeSelector: Invalid value: \"Example.com/x\": prefix part {SUBDOMAIN_FORMAT}"
            ),
            format!("{path}.nodeSelector: Invalid value: \"bad key\": name part {NAME_FORMAT}"),
            format!("{path}.nodeSelector: Invalid value: \"-bad\": {LABEL_VALUE_FORMAT}"),
            format!(
                "{required}.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
            ),
            format!(
                "{required}.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            ),
            format!(
                "{required}.matchExpressions[2].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
            ),
            format!(
                "{required}.matchExpressions[3].operator: Invalid value: \"Near\": not a valid selector operator"
            ),
            format!(
                "{required}.matchFields[0].values: Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
            ),
            format!(
                "{required}.matchFields[0].key: Invalid value: \"metadata.labels\": not a valid field selector key"
            ),
            format!(
                "{path}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100"
            ),
        ];
        assert_eq!(errors, expected);
    }

    #[test]
    fn no_selector_terms_is_an_error_and_other_kinds_are_not_judged() {
        let pod = json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}});
        assert_eq!(
            validate(
                "batch",
                "CronJob",
                &json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": pod.clone()}}}}})
            ),
            [
                "spec.jobTemplate.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required value: must have at least one node selector term"
            ]
        );
        assert!(validate("", "ConfigMap", &json!({"spec": pod})).is_empty());
    }

    #[test]
    fn qualified_names_follow_kubernetes() {
        assert!(qualified_name_errors("kubernetes.io/hostname").is_empty());
        assert!(qualified_name_errors("a").is_empty());
        assert_eq!(
            qualified_name_errors("/x"),
            ["prefix part must be non-empty"]
        );
        assert_eq!(qualified_name_errors("a/b/c").len(), 1);
        assert_eq!(
            qualified_name_errors(&"x".repeat(64)),
            ["name part must be no more than 63 characters"]
        );
        assert_eq!(
            qualified_name_errors(""),
            [
                "name part must be non-empty".to_owned(),
                format!("name part {NAME_FORMAT}")
            ]
        );
    }
}
