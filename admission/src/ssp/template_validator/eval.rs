//! Applying a rule set to a VM, as upstream's `Evaluator`: every rule is tried (greedy), a
//! malformed rule fails the whole evaluation rather than being skipped, a rule whose `valid`
//! path reaches nothing is skipped, and each applied rule says in words what it found.

use std::collections::HashSet;

use serde_json::Value;

use super::path::{Found, PathError, RulePath};
use super::rules::{IntOrPath, Rule, StringOrPath};
use super::shape::{Shape, reference_vm};

/// Why a rule could not be applied (upstream's internal errors, in its words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("duplicate Rule Name")]
    DuplicateName,
    #[error("unrecognized Rule type")]
    UnrecognizedType,
    /// A rule without `message`, or (where upstream would crash) without `path`.
    #[error("missing required key")]
    MissingKey,
    #[error("no values were found")]
    NoValues,
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("expected one value, found {0}")]
    NotOneValue(usize),
    #[error("mismatching type: {0}, not int or resource.Quantity")]
    NotInt(&'static str),
    #[error("mismatching type: {0}, not string")]
    NotString(&'static str),
    #[error("error parsing regexp: {0}")]
    Regex(String),
}

/// What became of one rule.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Its `valid` path reached nothing on the VM.
    Skipped,
    /// Applied, with what it found in words.
    Applied { satisfied: bool, text: String },
    /// It could not be applied.
    Failed(RuleError),
}

/// One rule and what became of it.
#[derive(Debug, Clone)]
pub struct Report<'r> {
    pub rule: &'r Rule,
    pub outcome: Outcome,
}

impl Report<'_> {
    /// A failure that refuses the VM on its own (not a `justWarning` rule's).
    pub fn refuses(&self) -> bool {
        match &self.outcome {
            Outcome::Failed(_) => true,
            Outcome::Applied { satisfied, .. } => !satisfied && !self.rule.just_warning,
            Outcome::Skipped => false,
        }
    }

    /// What a denial lists for this rule: a failure or an unsatisfied rule, `None` otherwise.
    pub fn cause(&self) -> Option<String> {
        let detail = match &self.outcome {
            Outcome::Failed(err) => err.to_string(),
            Outcome::Applied {
                satisfied: false,
                text,
            } => text.clone(),
            _ => return None,
        };
        Some(format!("{}: {detail}", self.rule.message))
    }
}

/// The VM under review and upstream's reference VM, where a path that is legal but absent
/// on the VM finds its zero value.
struct Subject {
    vm: Value,
    reference: Value,
}

impl Subject {
    fn find(&self, path: &RulePath) -> Result<Vec<Found>, PathError> {
        path.find(&self.vm).or_else(|_| path.find(&self.reference))
    }

    fn ints(&self, path: &RulePath) -> Result<Vec<i64>, RuleError> {
        self.find(path)?.iter().map(as_int).collect()
    }

    fn strings(&self, path: &RulePath) -> Result<Vec<String>, RuleError> {
        self.find(path)?.iter().map(as_string).collect()
    }

    fn int(&self, bound: &IntOrPath) -> Result<i64, RuleError> {
        match bound {
            IntOrPath::Int(value) => Ok(*value),
            IntOrPath::Path(path) => one(self.ints(path)?),
        }
    }

    fn string(&self, value: &StringOrPath) -> Result<String, RuleError> {
        match value {
            StringOrPath::Str(text) => Ok(text.clone()),
            StringOrPath::Path(path) => one(self.strings(path)?),
        }
    }
}

fn one<T>(mut values: Vec<T>) -> Result<T, RuleError> {
    match values.len() {
        1 => Ok(values.remove(0)),
        n => Err(RuleError::NotOneValue(n)),
    }
}

/// A value as an integer: numbers (rounded) and quantities.
fn as_int(found: &Found) -> Result<i64, RuleError> {
    match &found.value {
        Value::Number(n) => Ok(n
            .as_i64()
            .or_else(|| n.as_u64().map(|u| u as i64))
            .unwrap_or_else(|| n.as_f64().unwrap_or_default().round() as i64)),
        Value::String(_) if matches!(found.shape, Some(Shape::Str)) => {
            Err(RuleError::NotInt("string"))
        }
        Value::String(text) => api::quantity::parse_exact(text)
            .ok()
            .and_then(|v| i64::try_from(v).ok())
            .ok_or(RuleError::NotInt("resource.Quantity")),
        other => Err(RuleError::NotInt(go_kind(other))),
    }
}

fn as_string(found: &Found) -> Result<String, RuleError> {
    match &found.value {
        Value::String(text) => Ok(text.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(RuleError::NotString(go_kind(other))),
    }
}

fn go_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nil",
        Value::Bool(_) => "bool",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "struct",
    }
}

/// Applies every rule to `vm` (already defaulted), in order.
pub fn evaluate<'r>(rules: &'r [Rule], vm: &Value) -> Vec<Report<'r>> {
    let subject = Subject {
        vm: vm.clone(),
        reference: reference_vm(),
    };
    let mut names = HashSet::new();
    rules
        .iter()
        .map(|rule| {
            let outcome = if names.insert(rule.name.as_str()) {
                outcome(rule, &subject)
            } else {
                Outcome::Failed(RuleError::DuplicateName)
            };
            tracing::debug!(rule = %rule.name, ?outcome, "template validation rule");
            Report { rule, outcome }
        })
        .collect()
}

fn outcome(rule: &Rule, subject: &Subject) -> Outcome {
    if let Err(err) = well_formed(rule) {
        return Outcome::Failed(err);
    }
    if !applies(rule, &subject.vm) {
        return Outcome::Skipped;
    }
    match apply(rule, subject) {
        Ok((satisfied, text)) => Outcome::Applied { satisfied, text },
        Err(err) => Outcome::Failed(err),
    }
}

fn well_formed(rule: &Rule) -> Result<(), RuleError> {
    if !matches!(rule.rule.as_str(), "integer" | "string" | "enum" | "regex") {
        return Err(RuleError::UnrecognizedType);
    }
    if rule.message.is_empty() {
        return Err(RuleError::MissingKey);
    }
    Ok(())
}

/// A rule applies unless its `valid` path reaches nothing on the VM itself.
fn applies(rule: &Rule, vm: &Value) -> bool {
    rule.valid
        .as_ref()
        .is_none_or(|valid| valid.find(vm).is_ok_and(|found| !found.is_empty()))
}

/// Whether the rule holds, and what it found in words.
fn apply(rule: &Rule, subject: &Subject) -> Result<(bool, String), RuleError> {
    match rule.rule.as_str() {
        "integer" => {
            let range = Range::decode(&rule.min, &rule.max, subject)?;
            let values = nonempty(subject.ints(checked_path(rule)?)?)?;
            Ok(range.judge_values(&values))
        }
        "string" => {
            let range = Range::decode(&rule.min_length, &rule.max_length, subject)?;
            let values = nonempty(subject.strings(checked_path(rule)?)?)?;
            Ok(range.judge_lengths(&values))
        }
        "enum" => {
            let allowed = rule
                .values
                .iter()
                .map(|v| subject.string(v))
                .collect::<Result<Vec<_>, _>>()?;
            let values = nonempty(subject.strings(checked_path(rule)?)?)?;
            Ok(judge_enum(&values, &allowed))
        }
        _ => {
            let regex =
                regex::Regex::new(&rule.regex).map_err(|err| regex_error(&rule.regex, &err))?;
            let values = nonempty(subject.strings(checked_path(rule)?)?)?;
            Ok(judge_regex(&values, &regex))
        }
    }
}

/// The rule's path; upstream dereferences a missing one and crashes, here it is a missing key.
fn checked_path(rule: &Rule) -> Result<&RulePath, RuleError> {
    rule.path.as_ref().ok_or(RuleError::MissingKey)
}

fn nonempty<T>(values: Vec<T>) -> Result<Vec<T>, RuleError> {
    if values.is_empty() {
        return Err(RuleError::NoValues);
    }
    Ok(values)
}

fn regex_error(source: &str, err: &regex::Error) -> RuleError {
    let text = err.to_string();
    let reason = text
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or(&text)
        .trim()
        .trim_start_matches("error: ");
    RuleError::Regex(format!("{reason}: `{source}`"))
}

/// Optional lower and upper bounds.
struct Range {
    min: Option<i64>,
    max: Option<i64>,
}

impl Range {
    fn decode(
        min: &Option<IntOrPath>,
        max: &Option<IntOrPath>,
        subject: &Subject,
    ) -> Result<Self, RuleError> {
        Ok(Self {
            min: min.as_ref().map(|b| subject.int(b)).transpose()?,
            max: max.as_ref().map(|b| subject.int(b)).transpose()?,
        })
    }

    fn includes(&self, value: i64) -> bool {
        self.min.is_none_or(|min| value >= min) && self.max.is_none_or(|max| value <= max)
    }

    fn bounds(&self) -> (String, String) {
        let text = |b: Option<i64>| b.map_or_else(|| "N/A".to_owned(), |b| b.to_string());
        (text(self.min), text(self.max))
    }

    /// Upstream's words: every value is named where it breaks a bound, and the entries are
    /// separated by ", " whether or not the value broke one.
    fn judge_values(&self, values: &[i64]) -> (bool, String) {
        let (lower, upper) = self.bounds();
        if values.iter().all(|v| self.includes(*v)) {
            let list: Vec<String> = values.iter().map(i64::to_string).collect();
            let text = format!(
                "All values [{}] are in interval [{lower}, {upper}]",
                list.join(" ")
            );
            return (true, text);
        }
        let mut text = String::new();
        for (i, value) in values.iter().enumerate() {
            if self.min.is_some_and(|min| *value < min) {
                text.push_str(&format!("value {value} is lower than minimum [{lower}]"));
            }
            if self.max.is_some_and(|max| *value > max) {
                text.push_str(&format!("value {value} is higher than maximum [{upper}]"));
            }
            if i + 1 != values.len() {
                text.push_str(", ");
            }
        }
        (false, text)
    }

    fn judge_lengths(&self, values: &[String]) -> (bool, String) {
        let (lower, upper) = self.bounds();
        let fits = |v: &String| self.includes(i64::try_from(v.len()).unwrap_or(i64::MAX));
        if values.iter().all(fits) {
            // Upstream's spelling.
            (
                true,
                format!("Lengts of all strings are in interval [{lower}, {upper}]"),
            )
        } else {
            let text = format!("Lengths of some strings are not in interval [{lower}, {upper}]");
            (false, text)
        }
    }
}

fn judge_enum(values: &[String], allowed: &[String]) -> (bool, String) {
    let (current, allowed_text) = (values.join(", "), allowed.join(", "));
    if values.iter().all(|v| allowed.contains(v)) {
        (true, format!("All [{current}] are in [{allowed_text}]"))
    } else {
        (
            false,
            format!("Some of [{current}] are not in [{allowed_text}]"),
        )
    }
}

fn judge_regex(values: &[String], regex: &regex::Regex) -> (bool, String) {
    let current = values.join(", ");
    if values.iter().all(|v| regex.is_match(v)) {
        (true, format!("All [{current}] match {regex}"))
    } else {
        (false, format!("Some of [{current}] do not match {regex}"))
    }
}
