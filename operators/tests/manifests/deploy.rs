//! The manifests of `deploy/operators/`: the ClusterRole grants every call the controllers
//! make (`operators::rbac::PERMISSIONS`) and nothing by wildcard, and the Deployment runs
//! `ferrovirt controller` under the service account that role is bound to.

use std::path::PathBuf;

use operators::rbac::PERMISSIONS;
use serde_json::Value;

fn manifests(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/operators")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.split("\n---")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap_or_else(|e| panic!("{file}: {e}")))
        .filter(|doc| !doc.is_null())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn the_cluster_role_grants_every_call_of_the_controllers_and_no_wildcard() {
    let docs = manifests("rbac.yaml");
    let rules = of_kind(&docs, "ClusterRole")["rules"]
        .as_array()
        .expect("rules")
        .clone();
    for rule in &rules {
        for field in ["apiGroups", "resources", "verbs"] {
            assert!(!strings(&rule[field]).contains(&"*"), "wildcard in {rule}");
        }
    }
    let grants = |group: &str, resource: &str, verb: &str| {
        rules.iter().any(|rule| {
            strings(&rule["apiGroups"]).contains(&group)
                && strings(&rule["resources"]).contains(&resource)
                && strings(&rule["verbs"]).contains(&verb)
        })
    };
    let mut missing = Vec::new();
    for permission in PERMISSIONS {
        for verb in permission.verbs {
            if !grants(permission.group, permission.resource, verb) {
                missing.push(format!(
                    "{verb} {}/{}",
                    permission.group, permission.resource
                ));
            }
        }
    }
    assert!(missing.is_empty(), "the ClusterRole lacks: {missing:?}");
    // And nothing the controllers do not use.
    for rule in &rules {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    let used = PERMISSIONS.iter().any(|p| {
                        p.group == group && p.resource == resource && p.verbs.contains(&verb)
                    });
                    assert!(used, "{verb} {group}/{resource} is granted but never used");
                }
            }
        }
    }
}

#[test]
fn the_deployment_runs_the_controller_as_the_bound_service_account() {
    let rbac = manifests("rbac.yaml");
    let deployment = manifests("controller.yaml")
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    let binding = of_kind(&rbac, "ClusterRoleBinding");
    let account = of_kind(&rbac, "ServiceAccount");
    assert_eq!(
        binding["roleRef"]["name"],
        of_kind(&rbac, "ClusterRole")["metadata"]["name"]
    );
    let subject = &binding["subjects"][0];
    assert_eq!(subject["name"], account["metadata"]["name"]);
    assert_eq!(subject["namespace"], account["metadata"]["namespace"]);
    assert_eq!(
        deployment["metadata"]["namespace"],
        account["metadata"]["namespace"]
    );
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], account["metadata"]["name"]);
    let container = &pod["containers"][0];
    assert_eq!(strings(&container["args"]), ["controller"]);
    // One replica: the controllers do not elect a leader.
    assert_eq!(deployment["spec"]["replicas"], 1);
}
