//! The Priority admission plugin, as kube-apiserver's: a pod created gets the priority and
//! preemption policy of the PriorityClass it names (of the global default class when it
//! names none, else priority 0), an update keeps them; a PriorityClass may be the global
//! default only when no other is. Refusals read as kube-apiserver's Forbidden:
//! `pods "NAME" is forbidden: no PriorityClass with name X was found`.

use serde_json::{Value, json};

use super::plugin::{AdmissionPlugin, Hook, Refusal};
use super::request::{AdmissionRequest, Operation};
use crate::apiserver::priority_class::{
    self, GROUP, PLURAL, PREEMPT_LOWER_PRIORITY, is_global_default,
};

const PLUGIN: &str = "Priority";
const CLASSES_LISTED: usize = 10_000;

/// The plugin's three parts: the defaults of a new class, the priority of a pod, the one
/// global default class.
pub fn plugins() -> Vec<AdmissionPlugin> {
    let defaults = Hook::Mutating(Box::new(|_, class| {
        priority_class::set_defaults(class);
        Ok(Vec::new())
    }));
    let pods = Hook::Mutating(Box::new(|request, pod| {
        admit_pod(request, pod)?;
        Ok(Vec::new())
    }));
    let one_default = Hook::Validating(Box::new(|request| {
        validate_global_default(request)?;
        Ok(Vec::new())
    }));
    let create_update = [Operation::Create, Operation::Update];
    vec![
        AdmissionPlugin::built_in(PLUGIN, (GROUP, PLURAL), &create_update, defaults),
        AdmissionPlugin::forbidding(PLUGIN, ("", "pods"), &create_update, pods),
        AdmissionPlugin::forbidding(PLUGIN, (GROUP, PLURAL), &create_update, one_default),
    ]
}

/// What a pod's class gives it.
#[derive(Debug, PartialEq)]
struct Resolved {
    /// The class's name, given to a pod that named none (a global default's).
    class_name: Option<String>,
    priority: i64,
    preemption_policy: String,
}

fn admit_pod(request: &AdmissionRequest, pod: &mut Value) -> Result<(), Refusal> {
    match request.operation {
        Operation::Create => {
            let classes = request
                .list(GROUP, PLURAL, None, CLASSES_LISTED)
                .map_err(Refusal::from)?;
            resolve_pod_priority(pod, &classes)
        }
        Operation::Update => {
            if let Some(old) = request.old {
                keep_priority(pod, old);
            }
            Ok(())
        }
        Operation::Delete => Ok(()),
    }
}

/// Gives a new pod its priority from `classes`, or refuses it as kube-apiserver does.
fn resolve_pod_priority(pod: &mut Value, classes: &[Value]) -> Result<(), Refusal> {
    let named = pod["spec"]["priorityClassName"]
        .as_str()
        .filter(|name| !name.is_empty());
    let resolved = match named {
        Some(name) => named_class(name, classes)?,
        None => default_class(classes),
    };
    if let Some(given) = pod["spec"]["priority"].as_i64()
        && given != resolved.priority
    {
        return Err(Refusal::new(
            403,
            format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {} from the given PriorityClass name",
                resolved.priority
            ),
        ));
    }
    if let Some(given) = pod["spec"]["preemptionPolicy"].as_str()
        && given != resolved.preemption_policy
    {
        return Err(Refusal::new(
            403,
            format!(
                "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {} from the given PriorityClass name",
                resolved.preemption_policy
            ),
        ));
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    if let Some(class_name) = resolved.class_name {
        spec.insert("priorityClassName".into(), json!(class_name));
    }
    spec.insert("priority".into(), json!(resolved.priority));
    spec.insert("preemptionPolicy".into(), json!(resolved.preemption_policy));
    Ok(())
}

fn named_class(name: &str, classes: &[Value]) -> Result<Resolved, Refusal> {
    let class = classes
        .iter()
        .find(|class| class["metadata"]["name"] == name)
        .ok_or_else(|| Refusal::new(403, format!("no PriorityClass with name {name} was found")))?;
    Ok(Resolved {
        class_name: None,
        priority: priority_class::value(class),
        preemption_policy: preemption_policy(class),
    })
}

/// The global default class's priority (the lowest valued, should a race have made two),
/// else 0.
fn default_class(classes: &[Value]) -> Resolved {
    match global_default(classes) {
        Some(class) => Resolved {
            class_name: class["metadata"]["name"].as_str().map(str::to_owned),
            priority: priority_class::value(class),
            preemption_policy: preemption_policy(class),
        },
        None => Resolved {
            class_name: None,
            priority: 0,
            preemption_policy: PREEMPT_LOWER_PRIORITY.to_owned(),
        },
    }
}

fn global_default(classes: &[Value]) -> Option<&Value> {
    classes
        .iter()
        .filter(|class| is_global_default(class))
        .min_by_key(|class| priority_class::value(class))
}

fn preemption_policy(class: &Value) -> String {
    class["preemptionPolicy"]
        .as_str()
        .unwrap_or(PREEMPT_LOWER_PRIORITY)
        .to_owned()
}

/// An update keeps the priority the pod was created with.
fn keep_priority(pod: &mut Value, old: &Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["priority", "preemptionPolicy"] {
        let kept = &old["spec"][field];
        if !spec.contains_key(field) && !kept.is_null() {
            spec.insert(field.into(), kept.clone());
        }
    }
}

/// A class marked the global default is refused while another one is.
fn validate_global_default(request: &AdmissionRequest) -> Result<(), Refusal> {
    let Some(class) = request.object.filter(|class| is_global_default(class)) else {
        return Ok(());
    };
    let classes = request
        .list(GROUP, PLURAL, None, CLASSES_LISTED)
        .map_err(Refusal::from)?;
    let name = class["metadata"]["name"].as_str().unwrap_or_default();
    other_default(name, &classes).map_or(Ok(()), |other| {
        Err(Refusal::new(
            403,
            format!(
                "PriorityClass {other} is already marked as default. Only one default can exist"
            ),
        ))
    })
}

/// The global default class other than `name`, if one is.
fn other_default<'a>(name: &str, classes: &'a [Value]) -> Option<&'a str> {
    let default = global_default(classes)?;
    let default_name = default["metadata"]["name"].as_str()?;
    (default_name != name).then_some(default_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, value: i64, global_default: bool) -> Value {
        json!({"metadata": {"name": name}, "value": value, "globalDefault": global_default,
               "preemptionPolicy": "PreemptLowerPriority"})
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn a_pod_gets_the_priority_of_its_class() {
        let classes = [class("high", 1000, false), class("low", 10, true)];
        let mut named = pod(json!({"priorityClassName": "high"}));
        resolve_pod_priority(&mut named, &classes).unwrap();
        assert_eq!(named["spec"]["priority"], 1000);
        assert_eq!(named["spec"]["preemptionPolicy"], "PreemptLowerPriority");
        assert_eq!(named["spec"]["priorityClassName"], "high");
    }

    #[test]
    fn a_pod_without_a_class_gets_the_global_default_or_zero() {
        let classes = [class("high", 1000, false), class("low", 10, true)];
        let mut bare = pod(json!({}));
        resolve_pod_priority(&mut bare, &classes).unwrap();
        assert_eq!(bare["spec"]["priorityClassName"], "low");
        assert_eq!(bare["spec"]["priority"], 10);
        let mut alone = pod(json!({}));
        resolve_pod_priority(&mut alone, &[class("high", 1000, false)]).unwrap();
        assert_eq!(alone["spec"]["priority"], 0);
        assert!(alone["spec"]["priorityClassName"].is_null());
        assert_eq!(alone["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    }

    #[test]
    fn an_unknown_class_or_a_priority_given_is_refused_in_kube_apiservers_words() {
        let mut unknown = pod(json!({"priorityClassName": "missing"}));
        let refusal = resolve_pod_priority(&mut unknown, &[]).unwrap_err();
        assert_eq!(refusal.code, 403);
        assert_eq!(
            refusal.message,
            "no PriorityClass with name missing was found"
        );
        let mut given = pod(json!({"priorityClassName": "high", "priority": 5}));
        let refusal = resolve_pod_priority(&mut given, &[class("high", 1000, false)]).unwrap_err();
        assert_eq!(
            refusal.message,
            "the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"
        );
        let mut same = pod(json!({"priorityClassName": "high", "priority": 1000}));
        assert!(resolve_pod_priority(&mut same, &[class("high", 1000, false)]).is_ok());
    }

    #[test]
    fn an_update_keeps_the_priority_given_at_creation() {
        let old = pod(json!({"priority": 7, "preemptionPolicy": "Never"}));
        let mut updated = pod(json!({}));
        keep_priority(&mut updated, &old);
        assert_eq!(updated["spec"]["priority"], 7);
        assert_eq!(updated["spec"]["preemptionPolicy"], "Never");
    }

    #[test]
    fn only_one_class_is_the_global_default() {
        let classes = [class("a", 10, true), class("b", 5, false)];
        assert_eq!(other_default("b", &classes), Some("a"));
        assert_eq!(other_default("a", &classes), None, "a may stay the default");
        assert_eq!(other_default("c", &[class("b", 5, false)]), None);
    }
}
