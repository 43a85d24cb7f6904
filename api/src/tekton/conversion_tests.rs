use serde_json::json;

use super::*;

fn round_trip(v1beta1: &Value) -> (Value, Value) {
    let up = convert(v1beta1, V1).expect("converts to v1");
    let down = convert(&up, V1BETA1).expect("converts back to v1beta1");
    (up, down)
}

#[test]
fn a_task_runs_step_overrides_are_step_specs_and_its_task_results_results() {
    let v1beta1 = json!({
        "apiVersion": V1BETA1, "kind": "TaskRun", "metadata": {"name": "run"},
        "spec": {
            "taskRef": {"name": "build", "bundle": "registry/x:1"},
            "stepOverrides": [{"name": "s", "resources": {"limits": {"cpu": "1"}}}],
            "sidecarOverrides": [{"name": "c", "resources": {"requests": {"memory": "1Gi"}}}],
            "taskSpec": {"steps": [{"name": "s", "image": "i", "resources": {"limits": {"cpu": "2"}}}]},
        },
        "status": {
            "podName": "run-pod",
            "taskResults": [{"name": "r", "type": "string", "value": "x"}],
            "provenance": {"configSource": {"uri": "git://x"}},
        },
    });
    let (up, down) = round_trip(&v1beta1);
    assert_eq!(up["apiVersion"], V1);
    assert_eq!(
        up["spec"]["stepSpecs"],
        json!([{"name": "s", "computeResources": {"limits": {"cpu": "1"}}}])
    );
    assert_eq!(
        up["spec"]["sidecarSpecs"],
        json!([{"name": "c", "computeResources": {"requests": {"memory": "1Gi"}}}])
    );
    assert_eq!(up["spec"]["taskRef"], json!({"name": "build"}));
    assert_eq!(
        up["spec"]["taskSpec"]["steps"][0]["computeResources"],
        json!({"limits": {"cpu": "2"}})
    );
    assert_eq!(
        up["status"]["results"],
        json!([{"name": "r", "type": "string", "value": "x"}])
    );
    assert_eq!(
        up["status"]["provenance"],
        json!({"refSource": {"uri": "git://x"}})
    );
    assert!(up["spec"].get("stepOverrides").is_none());
    assert!(up["status"].get("taskResults").is_none());

    let mut expected = v1beta1.clone();
    expected["spec"]["taskRef"] = json!({"name": "build"});
    expected["status"]["provenance"] = json!({"refSource": {"uri": "git://x"}});
    assert_eq!(down, expected);
}

#[test]
fn a_pipeline_runs_account_pod_template_and_timeout_are_v1s_task_run_template_and_timeouts() {
    let v1beta1 = json!({
        "apiVersion": V1BETA1, "kind": "PipelineRun", "metadata": {"name": "pr"},
        "spec": {
            "pipelineRef": {"name": "p"},
            "serviceAccountName": "builder",
            "podTemplate": {"nodeSelector": {"a": "b"}},
            "timeout": "2h0m0s",
            "timeouts": {"pipeline": "1h0m0s", "tasks": "30m0s"},
            "taskRunSpecs": [{"pipelineTaskName": "t", "taskServiceAccountName": "sa",
                              "taskPodTemplate": {"hostNetwork": true},
                              "stepOverrides": [{"name": "s", "resources": {}}]}],
        },
        "status": {"pipelineResults": [{"name": "r", "value": "v"}]},
    });
    let (up, down) = round_trip(&v1beta1);
    assert_eq!(
        up["spec"]["taskRunTemplate"],
        json!({"serviceAccountName": "builder", "podTemplate": {"nodeSelector": {"a": "b"}}})
    );
    assert_eq!(
        up["spec"]["timeouts"],
        json!({"pipeline": "2h0m0s", "tasks": "30m0s"})
    );
    assert_eq!(
        up["spec"]["taskRunSpecs"],
        json!([{"pipelineTaskName": "t", "serviceAccountName": "sa",
                "podTemplate": {"hostNetwork": true},
                "stepSpecs": [{"name": "s", "computeResources": {}}]}])
    );
    assert_eq!(
        up["status"]["results"],
        json!([{"name": "r", "value": "v"}])
    );
    for gone in ["serviceAccountName", "podTemplate", "timeout"] {
        assert!(up["spec"].get(gone).is_none(), "{gone}");
    }

    // Back down, `timeout` is folded into `timeouts` for good, as in Tekton.
    let mut expected = v1beta1.clone();
    expected["spec"].as_object_mut().unwrap().remove("timeout");
    expected["spec"]["timeouts"]["pipeline"] = json!("2h0m0s");
    assert_eq!(down, expected);
}

#[test]
fn a_tasks_deprecated_step_fields_ride_in_the_annotation_and_come_back() {
    let v1beta1 = json!({
        "apiVersion": V1BETA1, "kind": "Task",
        "metadata": {"name": "t", "annotations": {"keep": "me"}},
        "spec": {
            "stepTemplate": {"name": "tmpl", "tty": true, "resources": {"limits": {"cpu": "1"}}},
            "steps": [
                {"name": "a", "image": "i", "ports": [{"containerPort": 80}]},
                {"name": "b", "image": "i"},
            ],
            "sidecars": [{"name": "c", "resources": {}, "ports": [{"containerPort": 81}]}],
        },
    });
    let (up, down) = round_trip(&v1beta1);
    assert_eq!(up["spec"]["steps"][0], json!({"name": "a", "image": "i"}));
    assert_eq!(
        up["spec"]["stepTemplate"],
        json!({"computeResources": {"limits": {"cpu": "1"}}})
    );
    assert_eq!(
        up["spec"]["sidecars"][0],
        json!({"name": "c", "computeResources": {}, "ports": [{"containerPort": 81}]})
    );
    let kept: Value = serde_json::from_str(
        up["metadata"]["annotations"][TASK_DEPRECATIONS_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        kept,
        json!({"t": {"deprecatedSteps": [{"ports": [{"containerPort": 80}]}, {}],
                     "deprecatedStepTemplate": {"tty": true, "name": "tmpl"}}})
    );
    assert_eq!(down, v1beta1);
}

#[test]
fn a_pipelines_embedded_tasks_convert_and_references_lose_their_bundle() {
    let v1beta1 = json!({
        "apiVersion": V1BETA1, "kind": "Pipeline", "metadata": {"name": "p"},
        "spec": {
            "tasks": [{"name": "a", "taskSpec": {"steps": [{"name": "s", "resources": {}}]}},
                      {"name": "b", "taskRef": {"name": "x", "bundle": "r/b:1"}}],
            "finally": [{"name": "f", "taskSpec": {"sidecars": [{"name": "c", "resources": {}}]}}],
        },
    });
    let up = convert(&v1beta1, V1).unwrap();
    assert_eq!(
        up["spec"]["tasks"][0]["taskSpec"]["steps"][0],
        json!({"name": "s", "computeResources": {}})
    );
    assert_eq!(up["spec"]["tasks"][1]["taskRef"], json!({"name": "x"}));
    assert_eq!(
        up["spec"]["finally"][0]["taskSpec"]["sidecars"][0],
        json!({"name": "c", "computeResources": {}})
    );
}

#[test]
fn the_same_version_is_left_alone_and_others_are_refused() {
    let v1 = json!({"apiVersion": V1, "kind": "Task", "spec": {}});
    assert_eq!(convert(&v1, V1).unwrap(), v1);
    assert_eq!(
        convert(&v1, "tekton.dev/v1alpha1"),
        Err(ConversionError::Versions {
            kind: "Task".into(),
            from: V1.into(),
            to: "tekton.dev/v1alpha1".into()
        })
    );
    let bad = json!({"apiVersion": V1, "kind": "Task", "spec": {},
                     "metadata": {"annotations": {TASK_DEPRECATIONS_ANNOTATION: "["}}});
    assert!(matches!(
        convert(&bad, V1BETA1),
        Err(ConversionError::Annotation(_))
    ));
}

#[test]
fn the_kept_steps_must_match_the_steps_in_number() {
    let v1 = json!({"apiVersion": V1, "kind": "Task", "metadata": {"name": "t", "annotations": {
        TASK_DEPRECATIONS_ANNOTATION: r#"{"t":{"deprecatedSteps":[{},{}]}}"#}},
        "spec": {"steps": [{"name": "a"}]}});
    assert_eq!(convert(&v1, V1BETA1), Err(ConversionError::StepCount));
}

#[test]
fn an_object_without_spec_converts_without_one_and_a_non_object_is_refused() {
    let bare = json!({"apiVersion": V1, "kind": "TaskRun", "metadata": {"name": "r"}});
    let down = convert(&bare, V1BETA1).unwrap();
    assert_eq!(
        down,
        json!({"apiVersion": V1BETA1, "kind": "TaskRun", "metadata": {"name": "r"}})
    );
    let odd = json!({"apiVersion": V1BETA1, "kind": "PipelineRun", "spec": "x", "status": 3});
    assert_eq!(convert(&odd, V1).unwrap()["spec"], "x");
    assert_eq!(
        convert(&json!([1]), V1),
        Err(ConversionError::Versions {
            kind: String::new(),
            from: String::new(),
            to: V1.into()
        })
    );
}
