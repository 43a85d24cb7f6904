use super::*;

fn tasks(spec: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    spec.iter()
        .map(|(n, deps)| (n.to_string(), deps.iter().map(|d| d.to_string()).collect()))
        .collect()
}

#[test]
fn a_graph_knows_each_tasks_parents_and_a_topological_order() {
    let g = Graph::build(&tasks(&[("c", &["a", "b"]), ("a", &[]), ("b", &["a"])])).unwrap();
    assert_eq!(g.tasks(), ["c", "a", "b"]);
    assert_eq!(g.parents("c").collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(g.topological(), ["a", "b", "c"]);
}

#[test]
fn duplicates_cycles_and_unknown_tasks_are_refused_with_tektons_words() {
    assert_eq!(
        Graph::build(&tasks(&[("a", &[]), ("a", &[])]))
            .unwrap_err()
            .to_string(),
        "task a is already present in Graph, can't add it again: duplicate pipeline task"
    );
    assert_eq!(
        Graph::build(&tasks(&[("x", &[]), ("c", &["b"]), ("b", &["c", "x"])]))
            .unwrap_err()
            .to_string(),
        "cycle detected; task \"b\" depends on \"c\""
    );
    assert_eq!(
        Graph::build(&tasks(&[("a", &["b", "c"]), ("b", &["a"]), ("c", &["a"])]))
            .unwrap_err()
            .to_string(),
        "cycle detected; task \"a\" depends on \"b\", \"c\""
    );
    assert_eq!(
        Graph::build(&tasks(&[("a", &["nope"])]))
            .unwrap_err()
            .to_string(),
        "couldn't add link between a and nope: task a depends on nope but nope wasn't present in Pipeline"
    );
}
