//! A finished run's results (`ApplyTaskResultsToPipelineResults`): each Pipeline result's
//! value with `$(tasks.T.results.R)` and `$(finally.T.results.R)` put in; a result whose
//! task did not succeed is left out, one whose reference cannot be resolved is an error.

use api::tekton::results::{PipelineResult, PipelineRunResult};

use super::refs::{self, parse_result_ref};
use super::resolve::Values;
use super::state::{Facts, Outcome};

/// The run's results, or the names of those whose references do not resolve.
pub fn pipeline_results(
    declared: &[PipelineResult],
    facts: &Facts,
) -> Result<Vec<PipelineRunResult>, Vec<String>> {
    let mut out = Vec::new();
    let mut invalid = Vec::new();
    for result in declared {
        match resolve_one(result, facts) {
            Resolution::Value(value) => out.push(PipelineRunResult {
                name: result.name.clone(),
                value,
            }),
            Resolution::Omitted => {}
            Resolution::Invalid => invalid.push(result.name.clone()),
        }
    }
    if invalid.is_empty() {
        Ok(out)
    } else {
        Err(invalid)
    }
}

enum Resolution {
    Value(api::tekton::ParamValue),
    Omitted,
    Invalid,
}

fn resolve_one(result: &PipelineResult, facts: &Facts) -> Resolution {
    let mut texts = Vec::new();
    if let Ok(json) = serde_json::to_value(&result.value) {
        refs::strings_of(&json, &mut texts);
    }
    let mut values = Values::default();
    for text in &texts {
        for expression in refs::expressions(text) {
            let (prefix, finally) = if expression.starts_with("finally.") {
                ("finally", true)
            } else {
                ("tasks", false)
            };
            let Some(r) = parse_result_ref(expression, prefix) else {
                return Resolution::Invalid;
            };
            let Some(state) = facts.state(&r.task).filter(|s| s.finally == finally) else {
                return Resolution::Invalid;
            };
            if state.outcome != Outcome::Succeeded {
                return Resolution::Omitted;
            }
            let Some(found) = state.results.iter().find(|res| res.name == r.result) else {
                return Resolution::Invalid;
            };
            let key = format!("{prefix}.{}.results.{}", r.task, r.result);
            values.insert(std::slice::from_ref(&key), &found.value);
            let resolvable = match &r.selector {
                refs::Selector::Index(_) | refs::Selector::Key(_) => {
                    values.replacements.strings.contains_key(expression)
                }
                _ => true,
            };
            if !resolvable {
                return Resolution::Invalid;
            }
        }
    }
    Resolution::Value(values.param_value(&result.value))
}
