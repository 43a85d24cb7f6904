//! The variables a Pipeline's text refers to: `$(tasks.T.results.R)` (with `[*]`, `[i]`,
//! `.key`), `$(finally.T.results.R)`, and finding every `$(...)` in a pipeline task, so the
//! graph can link a task to those whose results it reads.

use api::tekton::PipelineTask;
use serde_json::Value;

/// What part of a result a reference takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// `$(tasks.T.results.R)`: the value as it is.
    Whole,
    /// `$(tasks.T.results.R[*])`: the whole array (or object).
    All,
    /// `$(tasks.T.results.R[i])`: one element of an array.
    Index(usize),
    /// `$(tasks.T.results.R.key)`: one key of an object.
    Key(String),
}

/// A reference to a result of a pipeline task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultRef {
    /// The text between `$(` and `)`, the key its value replaces.
    pub expression: String,
    pub task: String,
    pub result: String,
    pub selector: Selector,
}

/// The text inside every `$(...)` of `text`.
pub fn expressions(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("$(") {
        let after = &rest[start + 2..];
        match after.find(')') {
            Some(end) => {
                out.push(&after[..end]);
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    out
}

/// `expression` as a reference to a result, when it starts with `prefix.` (`tasks` or
/// `finally`) and names one.
pub fn parse_result_ref(expression: &str, prefix: &str) -> Option<ResultRef> {
    let rest = expression.strip_prefix(prefix)?.strip_prefix('.')?;
    let (task, rest) = rest.split_once('.')?;
    let rest = rest.strip_prefix("results")?;
    let (result, selector) = if let Some(quoted) = rest.strip_prefix("[\"") {
        let (name, tail) = quoted.split_once("\"]")?;
        (name, tail)
    } else if let Some(quoted) = rest.strip_prefix("['") {
        let (name, tail) = quoted.split_once("']")?;
        (name, tail)
    } else {
        let rest = rest.strip_prefix('.')?;
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        (&rest[..end], &rest[end..])
    };
    let selector = match selector {
        "" => Selector::Whole,
        "[*]" => Selector::All,
        _ => match selector.strip_prefix('.') {
            Some(key) => Selector::Key(key.to_string()),
            None => Selector::Index(
                selector
                    .strip_prefix('[')?
                    .strip_suffix(']')?
                    .parse()
                    .ok()?,
            ),
        },
    };
    (!task.is_empty() && !result.is_empty()).then(|| ResultRef {
        expression: expression.to_string(),
        task: task.to_string(),
        result: result.to_string(),
        selector,
    })
}

/// Every string in a JSON value.
pub fn strings_of(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings_of(v, out)),
        Value::Object(fields) => fields.values().for_each(|v| strings_of(v, out)),
        _ => {}
    }
}

/// The strings of a pipeline task that may hold variables: its params, when expressions,
/// embedded task spec, display name, `taskRef` and workspace subpaths.
pub fn task_strings(task: &PipelineTask) -> Vec<String> {
    let mut out = Vec::new();
    let parts = [
        serde_json::to_value(&task.params),
        serde_json::to_value(&task.when),
        serde_json::to_value(&task.task_spec),
        serde_json::to_value(&task.display_name),
        serde_json::to_value(&task.task_ref),
        serde_json::to_value(&task.workspaces),
    ];
    for part in parts.into_iter().flatten() {
        strings_of(&part, &mut out);
    }
    out
}

/// The references to results of other tasks (`$(tasks.…)`) in a pipeline task.
pub fn task_result_refs(task: &PipelineTask) -> Vec<ResultRef> {
    let mut refs: Vec<ResultRef> = Vec::new();
    for text in task_strings(task) {
        for expression in expressions(&text) {
            match parse_result_ref(expression, "tasks") {
                Some(r) if !refs.contains(&r) => refs.push(r),
                _ => {}
            }
        }
    }
    refs
}

/// What a pipeline task waits for: `runAfter`, then the tasks whose results it reads.
pub fn dependencies(task: &PipelineTask) -> Vec<String> {
    let mut deps: Vec<String> = task.run_after.clone().unwrap_or_default();
    for r in task_result_refs(task) {
        if !deps.contains(&r.task) {
            deps.push(r.task);
        }
    }
    deps
}

#[cfg(test)]
#[path = "refs_tests.rs"]
mod tests;
