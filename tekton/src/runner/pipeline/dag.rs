//! The graph of a Pipeline's tasks (`pkg/reconciler/pipeline/dag`): one node per pipeline
//! task, an edge from each task it waits for (`runAfter` and the tasks whose results it
//! reads), refused when a name repeats, a dependency is unknown or the edges make a cycle,
//! with Tekton's messages.

use std::collections::{BTreeMap, BTreeSet};

/// Why the tasks do not form a graph, as `dag.Build` words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("task {0} is already present in Graph, can't add it again: duplicate pipeline task")]
    Duplicate(String),
    /// The lexicographically first task left in a cycle, and what it still waits for.
    #[error("cycle detected; task {task:?} depends on {}", quoted(.deps))]
    Cycle { task: String, deps: Vec<String> },
    #[error(
        "couldn't add link between {task} and {dep}: task {task} depends on {dep} but {dep} wasn't present in Pipeline"
    )]
    UnknownDependency { task: String, dep: String },
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tasks (in Pipeline order) and, for each, the tasks it waits for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    order: Vec<String>,
    parents: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// Builds the graph of `tasks`, each with its dependencies, checking names, then cycles,
    /// then dependencies, in upstream's order.
    pub fn build(tasks: &[(String, Vec<String>)]) -> Result<Graph, GraphError> {
        let mut graph = Graph::default();
        for (name, _) in tasks {
            if graph
                .parents
                .insert(name.clone(), BTreeSet::new())
                .is_some()
            {
                return Err(GraphError::Duplicate(name.clone()));
            }
            graph.order.push(name.clone());
        }
        find_cycle(tasks)?;
        for (name, deps) in tasks {
            for dep in deps {
                if !graph.parents.contains_key(dep) {
                    return Err(GraphError::UnknownDependency {
                        task: name.clone(),
                        dep: dep.clone(),
                    });
                }
                if let Some(parents) = graph.parents.get_mut(name) {
                    parents.insert(dep.clone());
                }
            }
        }
        Ok(graph)
    }

    /// The tasks in Pipeline order.
    pub fn tasks(&self) -> &[String] {
        &self.order
    }

    /// The tasks `task` waits for.
    pub fn parents(&self, task: &str) -> impl Iterator<Item = &String> {
        self.parents.get(task).into_iter().flatten()
    }

    /// The tasks in an order where each comes after all it waits for (Pipeline order
    /// otherwise).
    pub fn topological(&self) -> Vec<&str> {
        let mut placed: BTreeSet<&str> = BTreeSet::new();
        let mut out = Vec::with_capacity(self.order.len());
        while out.len() < self.order.len() {
            let before = out.len();
            for name in &self.order {
                if !placed.contains(name.as_str())
                    && self.parents(name).all(|p| placed.contains(p.as_str()))
                {
                    placed.insert(name);
                    out.push(name.as_str());
                }
            }
            if out.len() == before {
                break;
            }
        }
        out
    }
}

/// Peels off tasks with nothing left to wait for; what remains is in a cycle.
fn find_cycle(tasks: &[(String, Vec<String>)]) -> Result<(), GraphError> {
    let deps: BTreeMap<&str, &Vec<String>> = tasks.iter().map(|(n, d)| (n.as_str(), d)).collect();
    let mut waiting: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut ready: BTreeSet<&str> = BTreeSet::new();
    for (task, task_deps) in tasks {
        if task_deps.is_empty() {
            continue;
        }
        waiting.insert(task, task_deps.iter().map(String::as_str).collect());
        for dep in task_deps {
            if deps.get(dep.as_str()).is_none_or(|d| d.is_empty()) {
                ready.insert(dep);
            }
        }
    }
    while let Some(parent) = ready.pop_first() {
        let children: Vec<&str> = waiting
            .iter()
            .filter(|(_, left)| left.contains(parent))
            .map(|(child, _)| *child)
            .collect();
        for child in children {
            if let Some(left) = waiting.get_mut(child) {
                left.remove(parent);
                if left.is_empty() {
                    waiting.remove(child);
                    ready.insert(child);
                }
            }
        }
    }
    match waiting.into_iter().next() {
        None => Ok(()),
        Some((task, left)) => Err(GraphError::Cycle {
            task: task.to_string(),
            deps: left.into_iter().map(String::from).collect(),
        }),
    }
}

#[cfg(test)]
#[path = "dag_tests.rs"]
mod tests;
