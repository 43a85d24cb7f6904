//! The chain's order and scope, on the server's objects: mutating plugins before the
//! schema, validating ones after it and on the mutated object, a conflict while admitting
//! makes the update again, the server's own writes pass the validating plugins.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::apiserver::errors::ApiError;
use crate::apiserver::identity::UserInfo;
use crate::apiserver::object::UpdateTarget;
use crate::apiserver::objects::Objects;
use crate::apiserver::resources::{Registry, ResourceType};
use crate::apiserver::store::{Persist, Store};

fn objects(dir: &std::path::Path) -> (Arc<Objects>, ResourceType) {
    let objects = Objects::new(
        Store::open(&dir.join("db")).unwrap(),
        Registry::with_builtins(),
    );
    let namespaces = objects.registry.find("", "v1", "namespaces").unwrap();
    let default = json!({"metadata": {"name": "default"}});
    objects.create(&namespaces, "v1", "", default).unwrap();
    let config_maps = objects.registry.find("", "v1", "configmaps").unwrap();
    (Arc::new(objects), config_maps)
}

fn config_maps() -> Resources {
    Resources::One {
        group: String::new(),
        plural: "configmaps".into(),
    }
}

/// A mutating plugin that labels config maps `admitted=yes`.
fn labeller() -> AdmissionPlugin {
    let mutate = Box::new(|_: &AdmissionRequest, object: &mut Value| {
        object["metadata"]["labels"]["admitted"] = json!("yes");
        Ok(vec!["labelled".to_owned()])
    });
    AdmissionPlugin::mutating("labeller", config_maps(), Wording::Webhook, mutate)
}

/// A validating plugin of config maps that records what it is shown and refuses objects
/// without the label.
fn recorder(seen: Arc<Mutex<Vec<Value>>>) -> AdmissionPlugin {
    let ops = [Operation::Create, Operation::Update, Operation::Delete];
    let validate = Box::new(move |request: &AdmissionRequest| {
        let subject = request.object.or(request.old).cloned().unwrap_or_default();
        seen.lock().unwrap().push(subject.clone());
        match subject["metadata"]["labels"]["admitted"].as_str() {
            Some("yes") => Ok(vec!["judged".to_owned()]),
            _ => Err(Refusal::denied("not labelled")),
        }
    });
    AdmissionPlugin::validating("recorder", ("", "configmaps"), &ops, validate)
}

fn client(user: &UserInfo) -> Write<'_> {
    Write::by(user, Persist::Commit)
}

#[test]
fn validating_plugins_judge_the_mutated_object_after_the_mutating_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, cms) = objects(dir.path());
    let seen = Arc::new(Mutex::new(Vec::new()));
    // Registered validating first: the chain still runs every mutating plugin before it.
    objects.register_admission(recorder(seen.clone()));
    objects.register_admission(labeller());
    let user = UserInfo::admin();
    let cm = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
    let created = (objects.create_as(client(&user), &cms, "v1", "default", cm)).unwrap();
    assert_eq!(created.object["metadata"]["labels"]["admitted"], "yes");
    assert_eq!(created.warnings, ["labelled", "judged"]);
    let shown = seen.lock().unwrap()[0].clone();
    // It is shown the object as it will be stored: labelled, named, given its uid.
    assert_eq!(shown["metadata"]["labels"]["admitted"], "yes");
    assert!(shown["metadata"]["uid"].is_string(), "{shown}");
}

#[test]
fn a_refusal_names_the_plugin_and_keeps_the_warnings_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, cms) = objects(dir.path());
    objects.register_admission(recorder(Arc::default()));
    let user = UserInfo::admin();
    let cm = json!({"metadata": {"name": "a"}});
    let err = objects
        .create_as(client(&user), &cms, "v1", "default", cm)
        .unwrap_err();
    let ApiError::Refused { code, message, .. } = err else {
        panic!("not a refusal: {err:?}");
    };
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "admission webhook \"recorder\" denied the request: not labelled"
    );
    assert!(
        objects
            .store
            .get("/configmaps", "default", "a")
            .unwrap()
            .is_none()
    );
}

#[test]
fn an_object_its_schema_refuses_never_reaches_the_validating_plugins() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, _) = objects(dir.path());
    let pods = Resources::One {
        group: String::new(),
        plural: "pods".into(),
    };
    // The mutating plugin makes the pod invalid: a node selector key that is no label key.
    let mutate = Box::new(|_: &AdmissionRequest, pod: &mut Value| {
        pod["spec"]["nodeSelector"] = json!({"not a key!": "x"});
        Ok(Vec::new())
    });
    objects.register_admission(AdmissionPlugin::mutating(
        "breaker",
        pods,
        Wording::Webhook,
        mutate,
    ));
    let judged = Arc::new(Mutex::new(0));
    let count = judged.clone();
    let validate = Box::new(move |_: &AdmissionRequest| {
        *count.lock().unwrap() += 1;
        Ok(Vec::new())
    });
    objects.register_admission(AdmissionPlugin::validating(
        "counter",
        ("", "pods"),
        &[Operation::Create],
        validate,
    ));
    let rt = objects.registry.find("", "v1", "pods").unwrap();
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let user = UserInfo::admin();
    let err = objects
        .create_as(client(&user), &rt, "v1", "default", pod)
        .unwrap_err();
    assert!(matches!(err, ApiError::SchemaInvalid { .. }), "{err:?}");
    assert_eq!(*judged.lock().unwrap(), 0);
}

#[test]
fn the_servers_own_writes_pass_the_mutating_plugins_only() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, cms) = objects(dir.path());
    let seen = Arc::new(Mutex::new(Vec::new()));
    objects.register_admission(recorder(seen.clone()));
    let cm = json!({"metadata": {"name": "a"}});
    objects.create(&cms, "v1", "default", cm).unwrap();
    objects
        .delete(&cms, "v1", "default", "a", Default::default(), None)
        .unwrap();
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn deletes_are_judged_on_the_stored_object() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, cms) = objects(dir.path());
    let seen = Arc::new(Mutex::new(Vec::new()));
    objects.register_admission(recorder(seen.clone()));
    let cm = json!({"metadata": {"name": "a"}});
    objects.create(&cms, "v1", "default", cm).unwrap();
    let user = UserInfo::admin();
    let options = (Default::default(), None);
    let err = objects.delete_as(client(&user), &cms, "v1", "default", "a", options);
    assert!(
        matches!(err, Err(ApiError::Refused { code: 403, .. })),
        "{err:?}"
    );
    assert_eq!(seen.lock().unwrap()[0]["metadata"]["name"], "a");
    assert!(
        objects
            .store
            .get("/configmaps", "default", "a")
            .unwrap()
            .is_some()
    );
}

/// While the first update is being judged another write changes the object: the update is
/// made again from the new object and judged again, and neither change is lost.
#[test]
fn an_update_raced_while_admitted_is_made_again_from_the_new_object() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, cms) = objects(dir.path());
    let cm = json!({"metadata": {"name": "a", "labels": {"admitted": "yes"}}, "data": {}});
    objects.create(&cms, "v1", "default", cm).unwrap();
    let judged = Arc::new(Mutex::new(0));
    let (racer, count, rt) = (objects.clone(), judged.clone(), cms.clone());
    let validate = Box::new(move |request: &AdmissionRequest| {
        let mut count = count.lock().unwrap();
        *count += 1;
        if *count == 1 {
            let mut raced = request.old.cloned().unwrap();
            raced["data"]["raced"] = json!("yes");
            racer
                .update(&rt, "v1", "default", "a", raced, UpdateTarget::Main)
                .unwrap();
        }
        Ok(Vec::new())
    });
    let ops = [Operation::Update];
    objects.register_admission(AdmissionPlugin::validating(
        "racer",
        ("", "configmaps"),
        &ops,
        validate,
    ));
    let user = UserInfo::admin();
    let patch = crate::apiserver::patch::Patch {
        kind: crate::apiserver::patch::PatchType::Merge,
        body: json!({"data": {"mine": "yes"}}),
        manager: None,
    };
    let main = UpdateTarget::Main;
    let written = objects.patch_as(client(&user), &cms, "v1", "default", "a", &patch, main);
    let data = &written.unwrap().object["data"];
    assert_eq!(*data, json!({"raced": "yes", "mine": "yes"}));
    assert_eq!(*judged.lock().unwrap(), 2);
}

#[test]
fn default_storage_class_runs_first() {
    let dir = tempfile::tempdir().unwrap();
    let (objects, _) = objects(dir.path());
    let classes = objects
        .registry
        .find("storage.k8s.io", "v1", "storageclasses")
        .unwrap();
    let default_class = json!({
        "metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "example.com/fast",
    });
    objects.create(&classes, "v1", "", default_class).unwrap();
    let seen_class = Arc::new(Mutex::new(Value::Null));
    let seen = seen_class.clone();
    let mutate = Box::new(move |_: &AdmissionRequest, pvc: &mut Value| {
        *seen.lock().unwrap() = pvc["spec"]["storageClassName"].clone();
        Ok(Vec::new())
    });
    let claims = Resources::One {
        group: String::new(),
        plural: "persistentvolumeclaims".into(),
    };
    objects.register_admission(AdmissionPlugin::mutating(
        "after",
        claims,
        Wording::Webhook,
        mutate,
    ));
    let pvcs = objects
        .registry
        .find("", "v1", "persistentvolumeclaims")
        .unwrap();
    let pvc = json!({"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}}});
    let user = UserInfo::admin();
    objects
        .create_as(client(&user), &pvcs, "v1", "default", pvc)
        .unwrap();
    assert_eq!(*seen_class.lock().unwrap(), "fast");
}
