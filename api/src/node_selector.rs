//! Whether a required node affinity (`core/v1` NodeSelector) picks a node, as the
//! scheduler's `nodeaffinity` helpers decide it: any one term, each term every
//! `matchExpressions` requirement on the node's labels (`In`, `NotIn`, `Exists`,
//! `DoesNotExist`, `Gt`, `Lt`) and every `matchFields` requirement (on `metadata.name`, the
//! one field Kubernetes allows). An empty or malformed term, or an empty list of terms,
//! picks nothing.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// Whether `selector` picks `node`.
pub fn selects(selector: &NodeSelector, node: &Node) -> bool {
    selector
        .node_selector_terms
        .iter()
        .any(|term| term_selects(term, node))
}

fn term_selects(term: &NodeSelectorTerm, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let mut node_fields = BTreeMap::new();
    if let Some(name) = &node.metadata.name {
        node_fields.insert("metadata.name".to_string(), name.clone());
    }
    expressions.iter().all(|r| holds(r, &labels)) && fields.iter().all(|r| holds(r, &node_fields))
}

fn holds(requirement: &NodeSelectorRequirement, values: &BTreeMap<String, String>) -> bool {
    let value = values.get(&requirement.key);
    let listed = requirement.values.as_deref().unwrap_or_default();
    let bound = || -> Option<(i64, i64)> {
        let [only] = listed else { return None };
        Some((value?.parse().ok()?, only.parse().ok()?))
    };
    // A malformed requirement (values where none belong, none where they must) makes its
    // term pick nothing, as the scheduler drops a term it cannot parse.
    match requirement.operator.as_str() {
        "In" | "NotIn" if listed.is_empty() => false,
        "Exists" | "DoesNotExist" if !listed.is_empty() => false,
        "In" => value.is_some_and(|v| listed.contains(v)),
        "NotIn" => !value.is_some_and(|v| listed.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => bound().is_some_and(|(v, b)| v > b),
        "Lt" => bound().is_some_and(|(v, b)| v < b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    }

    fn selector(terms: serde_json::Value) -> NodeSelector {
        serde_json::from_value(json!({"nodeSelectorTerms": terms})).unwrap()
    }

    #[test]
    fn any_term_and_every_requirement_in_it() {
        let gpu = node("a", json!({"gpu": "yes", "cores": "8"}));
        let plain = node("b", json!({"cores": "2"}));
        let picky = selector(json!([
            {"matchExpressions": [
                {"key": "gpu", "operator": "In", "values": ["yes"]},
                {"key": "cores", "operator": "Gt", "values": ["4"]},
            ]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]},
        ]));
        assert!(selects(&picky, &gpu));
        assert!(selects(&picky, &plain), "the second term names it");
        let not_gpu = selector(json!([{"matchExpressions": [
            {"key": "gpu", "operator": "DoesNotExist"},
            {"key": "cores", "operator": "Lt", "values": ["4"]},
        ]}]));
        assert!(!selects(&not_gpu, &gpu));
        assert!(selects(&not_gpu, &plain));
    }

    #[test]
    fn empty_terms_and_malformed_bounds_pick_nothing() {
        let any = node("a", json!({"cores": "x"}));
        assert!(!selects(&selector(json!([])), &any));
        assert!(!selects(&selector(json!([{}])), &any));
        let gt = selector(json!([{"matchExpressions": [
            {"key": "cores", "operator": "Gt", "values": ["4"]},
        ]}]));
        assert!(!selects(&gt, &any), "not a number");
        let malformed = selector(json!([{"matchExpressions": [
            {"key": "cores", "operator": "NotIn", "values": []},
        ]}]));
        assert!(!selects(&malformed, &any), "NotIn needs values");
    }
}
