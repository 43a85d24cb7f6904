//! CRD validation rules (`x-kubernetes-validations`): CEL expressions over `self` (the
//! value at the rule's schema node) and, in a transition rule, `oldSelf` (the stored value
//! it updates), with `message`, `messageExpression`, `fieldPath` and `reason` as
//! kube-apiserver reads them. The CEL itself is the `cel` crate's, with its strings and
//! lists extensions (`lowerAscii`, `indexOf`, `slice`, ...); a rule calling a function of
//! Kubernetes' own libraries that it lacks (`quantity()`, `url()`, `isSorted()`, ...) is
//! not judged.

use std::sync::{Arc, OnceLock};

use cel::{Context, Env, Program};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::values::type_name;

/// One compiled rule.
pub struct Rule {
    source: String,
    program: Program,
    message: Option<String>,
    message_expression: Option<Program>,
    /// Where a failure is reported, relative to the rule's node (`.spec.x`).
    field_path: String,
    reason: Reason,
    /// Refers to `oldSelf`: judged on updates of a value that existed before only.
    transition: bool,
}

/// The field error a failed rule gives.
#[derive(Clone, Copy)]
enum Reason {
    Invalid,
    Forbidden,
    Required,
    Duplicate,
}

/// The CEL environment every rule compiles and runs in.
fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Declaring both extensions into a fresh standard library cannot clash.
        let _ = env.add_extension(cel::extensions::strings);
        let _ = env.add_extension(cel::extensions::lists);
        Arc::new(env)
    })
}

/// Compiles the rules of one schema node (`listed`, the node's `x-kubernetes-validations`,
/// at `place` in the CRD); the errors name each rule that does not compile.
pub fn compile_all(listed: &Value, place: &str) -> Result<Vec<Rule>, Vec<String>> {
    let Some(listed) = listed.as_array() else {
        return Err(vec![format!(
            "{place}.x-kubernetes-validations: Invalid value: must be a list of rules"
        )]);
    };
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    for (i, entry) in listed.iter().enumerate() {
        let at = format!("{place}.x-kubernetes-validations[{i}]");
        match compile(entry, &at) {
            Ok(rule) => rules.push(rule),
            Err(error) => errors.push(error),
        }
    }
    if errors.is_empty() {
        Ok(rules)
    } else {
        Err(errors)
    }
}

fn compile(entry: &Value, at: &str) -> Result<Rule, String> {
    let source = entry["rule"]
        .as_str()
        .ok_or_else(|| format!("{at}.rule: Required value"))?
        .to_string();
    let program = env().compile(&source).map_err(|err| {
        format!("{at}.rule: Invalid value: {source:?}: compilation failed: {err}")
    })?;
    let message_expression = match entry["messageExpression"].as_str() {
        Some(text) => Some(env().compile(text).map_err(|err| {
            format!("{at}.messageExpression: Invalid value: {text:?}: compilation failed: {err}")
        })?),
        None => None,
    };
    let reason = match entry["reason"].as_str() {
        None | Some("FieldValueInvalid") => Reason::Invalid,
        Some("FieldValueForbidden") => Reason::Forbidden,
        Some("FieldValueRequired") => Reason::Required,
        Some("FieldValueDuplicate") => Reason::Duplicate,
        Some(other) => {
            return Err(format!(
                "{at}.reason: Unsupported value: {other:?}: supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
            ));
        }
    };
    let transition = program.references().has_variable("oldSelf");
    Ok(Rule {
        source,
        program,
        message: entry["message"].as_str().map(str::to_string),
        message_expression,
        field_path: entry["fieldPath"].as_str().unwrap_or_default().to_string(),
        reason,
        transition,
    })
}

impl Rule {
    /// The field error of `value` (at `path`) under this rule, if it fails.
    pub fn judge(&self, path: &str, value: &Value, old: Option<&Value>) -> Option<String> {
        if self.transition && old.is_none() {
            return None;
        }
        let context = context(value, old).ok()?;
        let field = match path {
            "" => self.field_path.trim_start_matches('.').to_string(),
            _ => format!("{path}{}", self.field_path),
        };
        let found = type_name(value);
        let message = match self.program.execute(&context) {
            Ok(cel::Value::Bool(true)) => return None,
            Ok(cel::Value::Bool(false)) => self.failure_message(&context),
            Ok(other) => format!(
                "rule did not evaluate to a bool: {other:?}, evaluating rule: {}",
                self.source
            ),
            // A function of Kubernetes' own CEL libraries (`quantity()`, `url()`, `ip()`,
            // `isSorted()`, ...), which this evaluator lacks: the rule is not judged, rather
            // than every write refused.
            Err(cel::ExecutionError::UndeclaredReference(name)) => {
                tracing::warn!(rule = %self.source, %name, "a CRD validation rule this server cannot evaluate");
                return None;
            }
            Err(err) => format!("{err}, evaluating rule: {}", self.source),
        };
        Some(match self.reason {
            Reason::Invalid => format!("{field}: Invalid value: \"{found}\": {message}"),
            Reason::Forbidden => format!("{field}: Forbidden: {message}"),
            Reason::Required => format!("{field}: Required value: {message}"),
            Reason::Duplicate => format!("{field}: Duplicate value: {message}"),
        })
    }

    /// `messageExpression`'s string if it gives one, else `message`, else the rule.
    fn failure_message(&self, context: &Context) -> String {
        if let Some(expression) = &self.message_expression
            && let Ok(cel::Value::String(text)) = expression.execute(context)
            && !text.trim().is_empty()
        {
            return text.to_string();
        }
        match &self.message {
            Some(message) => message.clone(),
            None => format!("failed rule: {}", self.source),
        }
    }
}

/// `self` and, for an update, `oldSelf`.
fn context(
    value: &Value,
    old: Option<&Value>,
) -> Result<Context<'static, 'static>, cel::SerializationError> {
    let mut context = Context::with_env(env().clone());
    context.add_variable_from_value("self", cel::to_value(Signed(value))?);
    if let Some(old) = old {
        context.add_variable_from_value("oldSelf", cel::to_value(Signed(old))?);
    }
    Ok(context)
}

/// A JSON value whose integers reach CEL as `int`, as Kubernetes declares an OpenAPI
/// integer; serde_json hands non-negative ones over as unsigned, and CEL has no
/// arithmetic between `int` and `uint` (`self.x + 1` would fail).
struct Signed<'a>(&'a Value);

impl Serialize for Signed<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Number(n) if n.is_i64() || n.is_u64() => match n.as_i64() {
                Some(i) => serializer.serialize_i64(i),
                None => self.0.serialize(serializer),
            },
            Value::Array(items) => serializer.collect_seq(items.iter().map(Signed)),
            Value::Object(fields) => {
                serializer.collect_map(fields.iter().map(|(k, v)| (k, Signed(v))))
            }
            other => other.serialize(serializer),
        }
    }
}
