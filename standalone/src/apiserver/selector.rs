//! Label selectors (`a=b,c!=d,e in (f,g),!h`) and field selectors (`metadata.name=x`,
//! `involvedObject.uid=...`, any dotted path into the object, `=`, `==` or `!=`).

use serde_json::Value;

use super::errors::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for term in split_terms(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_label_term(term)?);
        }
        Ok(LabelSelector(requirements))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let label = |key: &str| labels.get(key).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::NotExists(k) => label(k).is_none(),
        })
    }
}

/// Splits on commas that are not inside a `(...)` value set.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

fn parse_label_term(term: &str) -> Result<Requirement, ApiError> {
    let invalid = || ApiError::BadRequest(format!("unable to parse requirement: \"{term}\""));
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::NotExists(key.trim().to_string()));
    }
    for (op, notin) in [(" notin ", true), (" in ", false)] {
        if let Some((key, set)) = term.split_once(op) {
            let set = set
                .trim()
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(invalid)?;
            let values = set.split(',').map(|v| v.trim().to_string()).collect();
            let key = key.trim().to_string();
            return Ok(if notin {
                Requirement::NotIn(key, values)
            } else {
                Requirement::In(key, values)
            });
        }
    }
    if let Some((key, value)) = term.split_once("!=") {
        return Ok(Requirement::NotEquals(
            key.trim().into(),
            value.trim().into(),
        ));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Requirement::Equals(key.trim().into(), value.trim().into()));
    }
    if term.contains(char::is_whitespace) {
        return Err(invalid());
    }
    Ok(Requirement::Exists(term.to_string()))
}

/// A parsed field selector.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, equal, value) = if let Some((p, v)) = term.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (p, true, v)
            } else {
                return Err(ApiError::BadRequest(format!(
                    "invalid field selector: \"{term}\": expected field=value"
                )));
            };
            terms.push((path.trim().to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, value)| {
            let field = path
                .split('.')
                .try_fold(object, |v, key| v.get(key))
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                })
                .unwrap_or_default();
            (field == *value) == *equal
        })
    }

    /// Refuses a selector naming a field kube-apiserver does not select `kind` of `group` by
    /// (as it does: "field label not supported"), rather than answering what a cluster would
    /// not.
    pub fn check_selectable(&self, group: &str, kind: &str) -> Result<(), ApiError> {
        if group == "events.k8s.io" {
            // A view of the core Events, selected by either API's field names.
            return Ok(());
        }
        let extra = selectable_fields(group, kind);
        match self.0.iter().find(|(path, _, _)| {
            !matches!(path.as_str(), "metadata.name" | "metadata.namespace")
                && !extra.contains(&path.as_str())
        }) {
            Some((path, _, _)) => Err(ApiError::BadRequest(format!(
                "field label not supported: {path}"
            ))),
            None => Ok(()),
        }
    }

    /// The name a `metadata.name=` term pins the selection to, if any.
    pub fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(path, equal, _)| path == "metadata.name" && *equal)
            .map(|(_, _, value)| value.as_str())
    }
}

/// The fields besides `metadata.name` and `metadata.namespace` that kube-apiserver lets a
/// field selector name, per kind (its registries' field label conversions).
fn selectable_fields(group: &str, kind: &str) -> &'static [&'static str] {
    match (group, kind) {
        ("", "Pod") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ],
        ("", "Event") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "Secret") => &["type"],
        ("", "Namespace") => &["status.phase"],
        ("", "Node") => &["spec.unschedulable"],
        ("", "ReplicationController") | ("apps", "ReplicaSet") => &["status.replicas"],
        ("batch", "Job") => &["status.successful"],
        ("certificates.k8s.io", "CertificateSigningRequest") => &["spec.signerName"],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object() -> Value {
        json!({"metadata": {"name": "dv", "namespace": "ns", "labels": {"app": "web", "tier": "db"}},
               "involvedObject": {"uid": "u1"}, "status": {"phase": "Succeeded"}})
    }

    #[test]
    fn label_selectors() {
        let o = object();
        for (selector, expected) in [
            ("", true),
            ("app=web", true),
            ("app==web,tier=db", true),
            ("app!=web", false),
            ("app in (web, api),tier", true),
            ("app notin (web)", false),
            ("!missing", true),
            ("missing", false),
            ("tier in (x)", false),
        ] {
            assert_eq!(
                LabelSelector::parse(selector).unwrap().matches(&o),
                expected,
                "{selector}"
            );
        }
    }

    #[test]
    fn field_selectors() {
        let o = object();
        let s = FieldSelector::parse("metadata.name=dv,involvedObject.uid=u1").unwrap();
        assert!(s.matches(&o));
        assert_eq!(s.pinned_name(), Some("dv"));
        assert!(
            !FieldSelector::parse("status.phase!=Succeeded")
                .unwrap()
                .matches(&o)
        );
        assert!(FieldSelector::parse("spec.nodeName=").unwrap().matches(&o));
        assert!(FieldSelector::parse("nonsense").is_err());
        let selectable = |selector: &str, group: &str, kind: &str| {
            FieldSelector::parse(selector)
                .unwrap()
                .check_selectable(group, kind)
        };
        assert!(
            selectable(
                "metadata.name=a,metadata.namespace!=b",
                "cdi.kubevirt.io",
                "DataVolume"
            )
            .is_ok()
        );
        assert!(selectable("spec.nodeName=n,status.phase=Running", "", "Pod").is_ok());
        assert!(selectable("involvedObject.name=dv", "", "Event").is_ok());
        let refused = selectable("status.phase=Running", "", "ConfigMap").unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("field label not supported: status.phase"),
            "{refused}"
        );
    }
}
