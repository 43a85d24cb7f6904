use super::*;
use serde_json::json;

#[test]
fn result_references_are_parsed_in_every_form() {
    let r = |e: &str| parse_result_ref(e, "tasks").map(|r| (r.task, r.result, r.selector));
    assert_eq!(
        r("tasks.a.results.out"),
        Some(("a".into(), "out".into(), Selector::Whole))
    );
    assert_eq!(
        r("tasks.a.results.l[*]"),
        Some(("a".into(), "l".into(), Selector::All))
    );
    assert_eq!(
        r("tasks.a.results.l[2]"),
        Some(("a".into(), "l".into(), Selector::Index(2)))
    );
    assert_eq!(
        r("tasks.a.results.o.k"),
        Some(("a".into(), "o".into(), Selector::Key("k".into())))
    );
    assert_eq!(
        r("tasks.a.results[\"out\"]"),
        Some(("a".into(), "out".into(), Selector::Whole))
    );
    assert_eq!(r("tasks.a.status"), None);
    assert_eq!(r("params.a"), None);
    assert_eq!(
        parse_result_ref("finally.f.results.x", "finally").map(|r| r.task),
        Some("f".into())
    );
}

#[test]
fn a_tasks_dependencies_are_run_after_then_the_tasks_whose_results_it_reads() {
    let task: PipelineTask = serde_json::from_value(json!({
        "name": "t", "runAfter": ["z"],
        "params": [{"name": "p", "value": "$(tasks.a.results.x) $(tasks.z.results.y)"}],
        "when": [{"input": "$(tasks.b.results.c)", "operator": "in", "values": ["1"]}],
        "taskSpec": {"steps": [{"name": "s", "image": "i", "script": "$(tasks.c.results.d[*])"}]},
    }))
    .unwrap();
    assert_eq!(dependencies(&task), ["z", "a", "b", "c"]);
    assert_eq!(expressions("$(a) x $(b.c) $(unclosed"), ["a", "b.c"]);
}
