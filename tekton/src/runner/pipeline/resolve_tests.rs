use super::*;
use serde_json::json;

fn specs(v: serde_json::Value) -> Vec<ParamSpec> {
    serde_json::from_value(v).unwrap()
}

fn passed(v: serde_json::Value) -> Vec<Param> {
    serde_json::from_value(v).unwrap()
}

#[test]
fn params_are_checked_for_missing_ones_then_types() {
    let declared = specs(
        json!([{"name": "a"}, {"name": "b", "type": "array"}, {"name": "c", "default": "x"}]),
    );
    assert_eq!(
        check_params(&declared, &passed(json!([{"name": "b", "value": "s"}]))),
        Err(ParamProblem::Missing(vec!["a".into()]))
    );
    assert_eq!(
        check_params(
            &declared,
            &passed(json!([{"name": "a", "value": "s"}, {"name": "b", "value": "s"}]))
        ),
        Err(ParamProblem::TypeMismatch(vec!["b".into()]))
    );
    assert_eq!(
        check_params(
            &declared,
            &passed(json!([{"name": "a", "value": "s"}, {"name": "b", "value": ["s"]}]))
        ),
        Ok(())
    );
}

#[test]
fn values_are_passed_params_over_defaults_which_may_use_other_params() {
    let declared = specs(
        json!([{"name": "a"}, {"name": "b", "default": "$(params.a)-b"},
                               {"name": "l", "default": ["1", "2"]}]),
    );
    let v = param_values(&declared, &passed(json!([{"name": "a", "value": "A"}])));
    assert_eq!(
        v.text("$(params.a) $(params.b) $(params['l'][1])"),
        "A A-b 2"
    );
    assert_eq!(v.text("$(params.l[1])"), "2");
    assert_eq!(
        v.param_value(&ParamValue::String("$(params.l[*])".into())),
        ParamValue::Array(vec!["1".into(), "2".into()])
    );
    assert_eq!(
        v.param_value(&ParamValue::Array(vec!["0".into(), "$(params.l)".into()])),
        ParamValue::Array(vec!["0".into(), "1".into(), "2".into()])
    );
}

#[test]
fn an_embedded_spec_keeps_the_params_its_task_declares_or_is_passed() {
    let declared = specs(json!([{"name": "x"}, {"name": "y"}]));
    let v = param_values(
        &declared,
        &passed(json!([{"name": "x", "value": "X"}, {"name": "y", "value": "Y"}])),
    );
    let task: PipelineTask = serde_json::from_value(json!({
        "name": "t", "params": [{"name": "x", "value": "$(params.y)"}],
        "taskSpec": {"params": [{"name": "x"}],
                     "steps": [{"name": "s", "image": "i", "script": "$(params.x) $(params.y)"}]},
    }))
    .unwrap();
    let out = serde_json::to_value(v.pipeline_task(&task)).unwrap();
    assert_eq!(out["params"][0]["value"], "Y");
    assert_eq!(out["taskSpec"]["steps"][0]["script"], "$(params.x) Y");
}
