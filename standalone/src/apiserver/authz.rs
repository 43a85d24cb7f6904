//! Who is asking and what they may do: the identity of a request (the admin token, with
//! impersonation as `kubectl --as` sends it) and Kubernetes RBAC evaluated over the stored
//! Roles, ClusterRoles and their bindings.
//!
//! Written here rather than taken from a crate: RBAC evaluation is a few rules over objects
//! this server stores, and no maintained Rust crate implements it.

use serde_json::Value;

use super::errors::ApiError;
use super::identity::{ResourceAttributes, SERVICE_ACCOUNT_PREFIX, UserInfo};
use super::objects::{ListOptions, Objects};
use super::selector::LabelSelector;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Decides requests by the RBAC objects in the store.
pub struct Authorizer<'a> {
    objects: &'a Objects,
}

impl<'a> Authorizer<'a> {
    pub fn new(objects: &'a Objects) -> Self {
        Authorizer { objects }
    }

    /// Whether `user` may do what `attributes` say: members of system:masters always may;
    /// others when a rule of a role bound to them (cluster-wide, or in the namespace) allows it.
    pub fn allows(
        &self,
        user: &UserInfo,
        attributes: &ResourceAttributes,
    ) -> Result<bool, ApiError> {
        if user.is_master() || asks_about_itself(attributes) {
            return Ok(true);
        }
        for binding in self.list("clusterrolebindings", None)? {
            if binds(&binding, user) && self.role_allows(&binding, "", attributes)? {
                return Ok(true);
            }
        }
        if attributes.namespace.is_empty() {
            return Ok(false);
        }
        for binding in self.list("rolebindings", Some(&attributes.namespace))? {
            if binds(&binding, user)
                && self.role_allows(&binding, &attributes.namespace, attributes)?
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn list(&self, plural: &str, namespace: Option<&str>) -> Result<Vec<Value>, ApiError> {
        let Some(rt) = self.objects.registry.find(RBAC_GROUP, "v1", plural) else {
            return Ok(Vec::new());
        };
        Ok(self
            .objects
            .list(&rt, namespace, &ListOptions::default())?
            .items)
    }

    fn role_allows(
        &self,
        binding: &Value,
        namespace: &str,
        attributes: &ResourceAttributes,
    ) -> Result<bool, ApiError> {
        let role_ref = &binding["roleRef"];
        let name = role_ref["name"].as_str().unwrap_or_default();
        let role = match role_ref["kind"].as_str() {
            Some("ClusterRole") => self.find("clusterroles", "", name)?,
            Some("Role") if !namespace.is_empty() => self.find("roles", namespace, name)?,
            _ => None,
        };
        let Some(role) = role else {
            return Ok(false);
        };
        Ok(self
            .rules_of(&role)?
            .iter()
            .any(|rule| rule_allows(rule, attributes)))
    }

    fn find(&self, plural: &str, namespace: &str, name: &str) -> Result<Option<Value>, ApiError> {
        let Some(rt) = self.objects.registry.find(RBAC_GROUP, "v1", plural) else {
            return Ok(None);
        };
        self.objects.store.get(&rt.storage_key(), namespace, name)
    }

    /// A role's rules; an aggregated ClusterRole's are those of the ClusterRoles its
    /// selectors match (what the aggregation controller would have written).
    fn rules_of(&self, role: &Value) -> Result<Vec<Value>, ApiError> {
        let mut rules = array(&role["rules"]).to_vec();
        for selector in array(&role["aggregationRule"]["clusterRoleSelectors"]) {
            let labels = match_labels(selector)?;
            for other in self.list("clusterroles", None)? {
                if labels.matches(&other) && other["metadata"]["name"] != role["metadata"]["name"] {
                    rules.extend(array(&other["rules"]).iter().cloned());
                }
            }
        }
        Ok(rules)
    }
}

/// A SelfSubjectAccessReview: every authenticated user may ask what they may do, as the
/// bootstrap ClusterRole system:basic-user grants in Kubernetes.
fn asks_about_itself(attributes: &ResourceAttributes) -> bool {
    attributes.verb == "create"
        && attributes.group == "authorization.k8s.io"
        && attributes.resource == "selfsubjectaccessreviews"
}

fn array(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn match_labels(selector: &Value) -> Result<LabelSelector, ApiError> {
    let text = selector["matchLabels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    LabelSelector::parse(&text)
}

/// Whether a binding names `user` among its subjects.
fn binds(binding: &Value, user: &UserInfo) -> bool {
    let binding_ns = binding["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    array(&binding["subjects"]).iter().any(|subject| {
        let name = subject["name"].as_str().unwrap_or_default();
        match subject["kind"].as_str() {
            Some("User") => name == user.name,
            Some("Group") => user.groups.iter().any(|g| g == name),
            Some("ServiceAccount") => {
                let ns = subject["namespace"]
                    .as_str()
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or(binding_ns);
                user.name == format!("{SERVICE_ACCOUNT_PREFIX}{ns}:{name}")
            }
            _ => false,
        }
    })
}

/// Whether one PolicyRule allows the attributes.
fn rule_allows(rule: &Value, attributes: &ResourceAttributes) -> bool {
    let listed = |key: &str, wanted: &str| {
        array(&rule[key])
            .iter()
            .filter_map(Value::as_str)
            .any(|v| v == "*" || v == wanted)
    };
    let resource_matches = array(&rule["resources"])
        .iter()
        .filter_map(Value::as_str)
        .any(|r| resource_matches(r, attributes));
    let names = array(&rule["resourceNames"]);
    let name_matches = names.is_empty()
        || (!attributes.name.is_empty()
            && names.iter().any(|n| n.as_str() == Some(&attributes.name)));
    listed("verbs", &attributes.verb)
        && listed("apiGroups", &attributes.group)
        && resource_matches
        && name_matches
}

/// `pods`, `pods/log`, `*`, `*/scale` and `pods/*` as RBAC reads them.
fn resource_matches(rule_resource: &str, attributes: &ResourceAttributes) -> bool {
    if rule_resource == "*" {
        return true;
    }
    let (resource, subresource) = (&attributes.resource, &attributes.subresource);
    if subresource.is_empty() {
        return rule_resource == resource;
    }
    rule_resource == format!("{resource}/{subresource}")
        || rule_resource == format!("{resource}/*")
        || rule_resource == format!("*/{subresource}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attributes(
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
    ) -> ResourceAttributes {
        ResourceAttributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: "src".into(),
            name: "disk".into(),
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let rule = json!({"apiGroups": ["cdi.kubevirt.io"], "resources": ["datavolumes/source"], "verbs": ["create"]});
        assert!(rule_allows(
            &rule,
            &attributes("create", "cdi.kubevirt.io", "datavolumes", "source")
        ));
        assert!(!rule_allows(
            &rule,
            &attributes("create", "cdi.kubevirt.io", "datavolumes", "")
        ));
        assert!(!rule_allows(
            &rule,
            &attributes("delete", "cdi.kubevirt.io", "datavolumes", "source")
        ));
        assert!(!rule_allows(
            &rule,
            &attributes("create", "", "datavolumes", "source")
        ));
        let wild = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert!(rule_allows(&wild, &attributes("get", "", "pods", "log")));
        let named = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["other"]});
        assert!(!rule_allows(&named, &attributes("get", "", "pods", "")));
        let any_sub = json!({"apiGroups": [""], "resources": ["pods/*"], "verbs": ["get"]});
        assert!(rule_allows(&any_sub, &attributes("get", "", "pods", "log")));
        assert!(!rule_allows(&any_sub, &attributes("get", "", "pods", "")));
    }

    #[test]
    fn subjects_bind_users_groups_and_service_accounts() {
        let binding = json!({"metadata": {"namespace": "dst"}, "subjects": [
            {"kind": "User", "name": "alice"},
            {"kind": "Group", "name": "team"},
            {"kind": "ServiceAccount", "name": "default"},
        ]});
        assert!(binds(&binding, &UserInfo::impersonated("alice", vec![])));
        assert!(binds(
            &binding,
            &UserInfo::impersonated("bob", vec!["team".into()])
        ));
        let sa = UserInfo::impersonated("system:serviceaccount:dst:default", vec![]);
        assert!(
            sa.groups
                .contains(&"system:serviceaccounts:dst".to_string())
        );
        assert!(binds(&binding, &sa));
        assert!(!binds(
            &binding,
            &UserInfo::impersonated("system:serviceaccount:src:default", vec![])
        ));
        assert!(!binds(&binding, &UserInfo::impersonated("carol", vec![])));
    }

    #[test]
    fn denials_read_as_kube_apiserver_writes_them() {
        let user = UserInfo::impersonated("alice", vec![]);
        let err = attributes("create", "cdi.kubevirt.io", "datavolumes", "source").forbidden(&user);
        assert_eq!(
            err.to_string(),
            "datavolumes.cdi.kubevirt.io \"disk\" is forbidden: User \"alice\" cannot create resource \"datavolumes/source\" in API group \"cdi.kubevirt.io\" in the namespace \"src\""
        );
        let mut list = attributes("list", "", "namespaces", "");
        list.namespace.clear();
        list.name.clear();
        assert_eq!(
            list.forbidden(&user).to_string(),
            "namespaces is forbidden: User \"alice\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        );
    }
}
