use super::*;
use serde_json::json;

fn run(extra: serde_json::Value) -> PipelineRun {
    let mut pr = json!({
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"name": "run", "namespace": "ns", "uid": "u"},
        "spec": {"pipelineRef": {"name": "p"}},
    });
    json_patch::merge(&mut pr, &extra);
    serde_json::from_value(pr).unwrap()
}

#[test]
fn a_tasks_settings_are_the_template_with_its_entry_over_it() {
    let pr = run(json!({"spec": {
        "taskRunTemplate": {"serviceAccountName": "sa",
                            "podTemplate": {"nodeSelector": {"a": "1"}, "hostNetwork": true}},
        "taskRunSpecs": [{"pipelineTaskName": "t", "timeout": "2m",
                          "podTemplate": {"nodeSelector": {"b": "2"}}}]}}));
    let t = task_run_spec(&pr, "t");
    assert_eq!(t.service_account_name.as_deref(), Some("sa"));
    assert_eq!(t.timeout.as_deref(), Some("2m"));
    assert_eq!(
        serde_json::to_value(&t.pod_template).unwrap(),
        json!({"nodeSelector": {"b": "2"}, "hostNetwork": true})
    );
    let other = task_run_spec(&pr, "other");
    assert_eq!(
        serde_json::to_value(&other.pod_template).unwrap(),
        json!({"nodeSelector": {"a": "1"}, "hostNetwork": true})
    );
    assert_eq!(
        task_run_spec(&run(json!({})), "t")
            .service_account_name
            .as_deref(),
        Some("default")
    );
}

#[test]
fn a_task_run_keeps_the_name_its_run_recorded() {
    let pr = run(json!({"status": {"childReferences": [
        {"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "name": "older-name", "pipelineTaskName": "t"}]}}));
    assert_eq!(task_run_name(&pr, "t"), "older-name");
    assert_eq!(task_run_name(&pr, "u"), "run-u");
    let long = run(json!({"metadata": {"name": "r".repeat(60)}}));
    assert_eq!(task_run_name(&long, "task").len(), 63);
}

#[test]
fn subpaths_are_joined_as_go_joins_them() {
    assert_eq!(join_sub_paths(Some("a/"), Some("/b")), Some("a/b".into()));
    assert_eq!(join_sub_paths(None, Some("b")), Some("b".into()));
    assert_eq!(join_sub_paths(Some(""), None), None);
}
