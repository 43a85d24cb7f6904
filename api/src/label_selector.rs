//! Whether a `metav1.LabelSelector` selects a set of labels, as apimachinery's
//! `LabelSelectorAsSelector` then `Matches` decide it: every `matchLabels` pair and every
//! `matchExpressions` requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`) must hold; an
//! empty selector selects everything. A requirement with an unknown operator selects nothing,
//! where apimachinery refuses the selector.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// Whether apimachinery would take `selector`: `In` and `NotIn` name values, `Exists` and
/// `DoesNotExist` none, and no other operator.
pub fn is_valid(selector: &LabelSelector) -> bool {
    selector.match_expressions.iter().flatten().all(|r| {
        let has_values = r.values.as_ref().is_some_and(|v| !v.is_empty());
        match r.operator.as_str() {
            "In" | "NotIn" => has_values,
            "Exists" | "DoesNotExist" => !has_values,
            _ => false,
        }
    })
}

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

/// The selector in apimachinery's canonical text form (`LabelSelectorAsSelector(s).String()`),
/// as a scale subresource's `status.selector` carries it to a HorizontalPodAutoscaler:
/// requirements sorted by key, `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined by
/// commas; the empty selector is the empty string.
pub fn canonical(selector: &LabelSelector) -> String {
    let mut requirements: Vec<(String, String)> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(key, value)| (key.clone(), format!("{key}={value}")))
        .collect();
    for r in selector.match_expressions.iter().flatten() {
        let mut values: Vec<&str> = r.values.iter().flatten().map(String::as_str).collect();
        values.sort_unstable();
        let key = &r.key;
        let text = match r.operator.as_str() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other} ({})", values.join(",")),
        };
        requirements.push((key.clone(), text));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    let texts: Vec<String> = requirements.into_iter().map(|(_, text)| text).collect();
    texts.join(",")
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
    fn canonical_form_is_apimachinerys() {
        assert_eq!(canonical(&selector(json!({}))), "");
        let s = selector(json!({"matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]},
                                 {"key": "aa", "operator": "DoesNotExist"}]}));
        assert_eq!(canonical(&s), "a=1,!aa,b=2,c in (x,y)");
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

    #[test]
    fn selectors_apimachinery_refuses_are_told_apart() {
        let with = |op: &str, values: serde_json::Value| {
            is_valid(&selector(
                json!({"matchExpressions": [{"key": "k", "operator": op, "values": values}]}),
            ))
        };
        assert!(with("In", json!(["a"])));
        assert!(!with("In", json!([])), "In without values");
        assert!(!with("NotIn", json!(null)), "NotIn without values");
        assert!(with("Exists", json!(null)));
        assert!(!with("Exists", json!(["a"])), "Exists with values");
        assert!(!with("Gt", json!(["1"])));
        assert!(is_valid(&selector(json!({"matchLabels": {"a": "b"}}))));
    }
}
