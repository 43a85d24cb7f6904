//! Whether a `metav1.LabelSelector` selects a set of labels, as apimachinery's
//! `LabelSelectorAsSelector` then `Matches` decide it: every `matchLabels` pair and every
//! `matchExpressions` requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`) must hold; an
//! empty selector selects everything. A requirement with an unknown operator selects nothing,
//! where apimachinery refuses the selector.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// Whether `selector` selects an object labelled `labels`.
pub fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs = selector.match_labels.iter().flatten();
    let requirements = selector.match_expressions.iter().flatten();
    pairs
        .into_iter()
        .all(|(key, value)| labels.get(key) == Some(value))
        && requirements.into_iter().all(|r| holds(r, labels))
}

fn holds(requirement: &LabelSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&requirement.key);
    let listed = |v: &String| requirement.values.iter().flatten().any(|w| w == v);
    match requirement.operator.as_str() {
        "In" => value.is_some_and(listed),
        "NotIn" => !value.is_some_and(listed),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selector(value: serde_json::Value) -> LabelSelector {
        serde_json::from_value(value).expect("a selector")
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn match_labels_and_every_operator() {
        let ns = labels(&[("autoCpuLimit", "true"), ("team", "a")]);
        assert!(selects(&selector(json!({})), &ns), "empty selects all");
        assert!(selects(
            &selector(json!({"matchLabels": {"autoCpuLimit": "true"}})),
            &ns
        ));
        assert!(!selects(
            &selector(json!({"matchLabels": {"autoCpuLimit": "false"}})),
            &ns
        ));
        let expression = |op: &str, values: serde_json::Value| {
            selector(
                json!({"matchExpressions": [{"key": "team", "operator": op, "values": values}]}),
            )
        };
        assert!(selects(&expression("In", json!(["a", "b"])), &ns));
        assert!(!selects(&expression("In", json!(["b"])), &ns));
        assert!(selects(&expression("NotIn", json!(["b"])), &ns));
        assert!(!selects(&expression("NotIn", json!(["a"])), &ns));
        assert!(
            selects(&expression("NotIn", json!(["a"])), &labels(&[])),
            "absent is not in"
        );
        assert!(selects(&expression("Exists", json!(null)), &ns));
        assert!(!selects(&expression("DoesNotExist", json!(null)), &ns));
        assert!(
            !selects(&expression("Gt", json!(["1"])), &ns),
            "unknown operator"
        );
        let both = selector(json!({"matchLabels": {"autoCpuLimit": "true"},
            "matchExpressions": [{"key": "team", "operator": "In", "values": ["b"]}]}));
        assert!(!selects(&both, &ns), "every requirement must hold");
    }
}
