//! Validation rules as a template (annotation `validations`) or a VM (annotation
//! `vm.kubevirt.io/validations`) writes them: a JSON array of objects, decoded as upstream's
//! Go decoder decodes it, with its error messages, since a rule set that does not decode
//! refuses the VM with that message.

use serde_json::{Map, Value};

use super::path::{PathError, RulePath, is_path};

/// One rule of the JSON array.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rule {
    /// `integer`, `string`, `enum` or `regex`.
    pub rule: String,
    /// Unique within the set.
    pub name: String,
    /// What the rule checks; `None` when the rule leaves it out.
    pub path: Option<RulePath>,
    /// What a denial says first.
    pub message: String,
    /// A path that must reach something on the VM for the rule to apply.
    pub valid: Option<RulePath>,
    /// A failure only warns.
    pub just_warning: bool,
    /// `enum`: the allowed values.
    pub values: Vec<StringOrPath>,
    /// `integer`: the bounds of the values.
    pub min: Option<IntOrPath>,
    pub max: Option<IntOrPath>,
    /// `string`: the bounds of the lengths.
    pub min_length: Option<IntOrPath>,
    pub max_length: Option<IntOrPath>,
    /// `regex`: what every value must match.
    pub regex: String,
}

/// A number given directly or read from the VM.
#[derive(Debug, Clone, PartialEq)]
pub enum IntOrPath {
    Int(i64),
    Path(RulePath),
}

/// A string given directly or read from the VM.
#[derive(Debug, Clone, PartialEq)]
pub enum StringOrPath {
    Str(String),
    Path(RulePath),
}

/// Why a rule set does not decode, in the words of Go's `encoding/json` and of upstream's
/// decoders.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RulesError {
    /// The text is not JSON.
    #[error("{0}")]
    Syntax(String),
    /// A value has the wrong JSON type for what it decodes into.
    #[error("json: cannot unmarshal {found} into Go value of type {want}")]
    ValueType {
        found: &'static str,
        want: &'static str,
    },
    /// A field of a rule has the wrong JSON type.
    #[error("json: cannot unmarshal {found} into Go struct field Rule.{field} of type {want}")]
    FieldType {
        found: &'static str,
        field: &'static str,
        want: &'static str,
    },
    /// A path does not parse.
    #[error(transparent)]
    Path(#[from] PathError),
    /// A bound is neither a number nor a path.
    #[error("cannot unmarshall IntOrPath from JSON: {0}")]
    IntOrPath(Box<RulesError>),
}

/// Decodes a rule set; an empty text holds no rules.
pub fn parse_rules(text: &str) -> Result<Vec<Rule>, RulesError> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let value: Value = serde_json::from_str(text).map_err(|err| syntax_error(text, &err))?;
    let mut decoder = Decoder::default();
    let rules = match &value {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|item| decoder.rule(item))
            .collect::<Result<_, _>>()?,
        other => {
            return Err(RulesError::ValueType {
                found: json_kind(other),
                want: "[]validation.Rule",
            });
        }
    };
    match decoder.type_error {
        Some(err) => Err(err),
        None => Ok(rules),
    }
}

/// Go's messages for text that is not JSON.
fn syntax_error(text: &str, err: &serde_json::Error) -> RulesError {
    if err.is_eof() {
        return RulesError::Syntax("unexpected end of JSON input".to_owned());
    }
    let at = text
        .lines()
        .nth(err.line().saturating_sub(1))
        .and_then(|line| line.chars().nth(err.column().saturating_sub(1)));
    let detail = err.to_string();
    match at {
        Some(c) if detail.starts_with("expected value") => RulesError::Syntax(format!(
            "invalid character '{c}' looking for beginning of value"
        )),
        Some(c) => RulesError::Syntax(format!("invalid character '{c}': {detail}")),
        None => RulesError::Syntax(detail),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's decoder goes on after a value of the wrong type and reports the first such error at
/// the end, unless a custom decoder (a path, a bound) fails first, which stops it.
#[derive(Default)]
struct Decoder {
    type_error: Option<RulesError>,
}

impl Decoder {
    fn rule(&mut self, item: &Value) -> Result<Rule, RulesError> {
        let mut rule = Rule::default();
        let fields = match item {
            Value::Null => return Ok(rule),
            Value::Object(fields) => fields,
            other => {
                self.mistyped(RulesError::ValueType {
                    found: json_kind(other),
                    want: "validation.Rule",
                });
                return Ok(rule);
            }
        };
        for (key, value) in ordered(fields) {
            self.field(&mut rule, key, value)?;
        }
        Ok(rule)
    }

    /// Sets the field a key names (matched without regard to case, as Go matches).
    fn field(&mut self, rule: &mut Rule, key: &str, value: &Value) -> Result<(), RulesError> {
        let name = FIELDS.iter().find(|f| f.eq_ignore_ascii_case(key));
        match name.copied() {
            Some("rule") => self.string(value, "rule", "validation.RuleType", &mut rule.rule),
            Some("name") => self.string(value, "name", "string", &mut rule.name),
            Some("message") => self.string(value, "message", "string", &mut rule.message),
            Some("regex") => self.string(value, "regex", "string", &mut rule.regex),
            Some("justWarning") => self.boolean(value, &mut rule.just_warning),
            Some("path") => rule.path = Some(path(value)?),
            Some("valid") => rule.valid = nullable(value, path)?,
            Some("values") => self.values(value, &mut rule.values)?,
            Some("min") => rule.min = nullable(value, int_or_path)?,
            Some("max") => rule.max = nullable(value, int_or_path)?,
            Some("minLength") => rule.min_length = nullable(value, int_or_path)?,
            Some("maxLength") => rule.max_length = nullable(value, int_or_path)?,
            _ => {}
        }
        Ok(())
    }

    fn mistyped(&mut self, err: RulesError) {
        self.type_error.get_or_insert(err);
    }

    fn string(&mut self, value: &Value, field: &'static str, want: &'static str, to: &mut String) {
        match value {
            Value::Null => {}
            Value::String(text) => text.clone_into(to),
            other => self.mistyped(RulesError::FieldType {
                found: json_kind(other),
                field,
                want,
            }),
        }
    }

    fn boolean(&mut self, value: &Value, to: &mut bool) {
        match value {
            Value::Null => {}
            Value::Bool(flag) => *to = *flag,
            other => self.mistyped(RulesError::FieldType {
                found: json_kind(other),
                field: "justWarning",
                want: "bool",
            }),
        }
    }

    fn values(&mut self, value: &Value, to: &mut Vec<StringOrPath>) -> Result<(), RulesError> {
        match value {
            Value::Null => to.clear(),
            Value::Array(items) => {
                *to = items.iter().map(string_or_path).collect::<Result<_, _>>()?;
            }
            other => self.mistyped(RulesError::FieldType {
                found: json_kind(other),
                field: "values",
                want: "[]path.StringOrPath",
            }),
        }
        Ok(())
    }
}

/// The names of a rule's fields, as the JSON spells them.
const FIELDS: [&str; 12] = [
    "rule",
    "name",
    "path",
    "message",
    "valid",
    "justWarning",
    "values",
    "min",
    "max",
    "minLength",
    "maxLength",
    "regex",
];

/// The keys of an object with exact spellings last, so that they win over keys that only
/// match without regard to case.
fn ordered(fields: &Map<String, Value>) -> impl Iterator<Item = (&str, &Value)> {
    let exact = |key: &str| FIELDS.contains(&key);
    let folded = fields.iter().filter(move |(k, _)| !exact(k));
    let exact = fields.iter().filter(move |(k, _)| exact(k));
    folded.chain(exact).map(|(k, v)| (k.as_str(), v))
}

/// `null` as absent, anything else through `decode`.
fn nullable<T>(
    value: &Value,
    decode: impl Fn(&Value) -> Result<T, RulesError>,
) -> Result<Option<T>, RulesError> {
    match value {
        Value::Null => Ok(None),
        other => decode(other).map(Some),
    }
}

/// A JSON string (`null` reads as the empty string), as `json.Unmarshal(bytes, &str)`.
fn plain_string(value: &Value) -> Result<&str, RulesError> {
    match value {
        Value::Null => Ok(""),
        Value::String(text) => Ok(text),
        other => Err(RulesError::ValueType {
            found: json_kind(other),
            want: "string",
        }),
    }
}

fn path(value: &Value) -> Result<RulePath, RulesError> {
    Ok(RulePath::parse(plain_string(value)?)?)
}

fn string_or_path(value: &Value) -> Result<StringOrPath, RulesError> {
    let text = plain_string(value)?;
    if is_path(text) {
        return Ok(StringOrPath::Path(RulePath::parse(text)?));
    }
    Ok(StringOrPath::Str(text.to_owned()))
}

/// A number (rounded to an integer) or a path.
fn int_or_path(value: &Value) -> Result<IntOrPath, RulesError> {
    if let Some(number) = value.as_i64() {
        return Ok(IntOrPath::Int(number));
    }
    if let Some(number) = value.as_f64() {
        // Go rounds half away from zero and saturates, as `as` does.
        return Ok(IntOrPath::Int(number.round() as i64));
    }
    path(value)
        .map(IntOrPath::Path)
        .map_err(|err| RulesError::IntOrPath(Box::new(err)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse_rules(text).expect_err("refused").to_string()
    }

    #[test]
    fn a_rule_decodes_every_field() {
        let rules = parse_rules(
            r#"[{"name": "memory", "rule": "integer", "path": "jsonpath::.spec.domain.memory.guest",
                 "message": "more memory", "min": 1073741824, "max": 2.6, "justWarning": true,
                 "valid": "jsonpath::.spec.domain.memory",
                 "values": ["a", "jsonpath::.spec.domain.machine.type"],
                 "minLength": 1, "maxLength": "jsonpath::.spec.domain.cpu.cores", "regex": "^a"}]"#,
        )
        .expect("rules");
        let rule = &rules[0];
        assert_eq!(
            (rule.name.as_str(), rule.rule.as_str()),
            ("memory", "integer")
        );
        assert_eq!(
            rule.path.as_ref().map(RulePath::expr),
            Some(".spec.domain.memory.guest")
        );
        assert_eq!(rule.min, Some(IntOrPath::Int(1_073_741_824)));
        assert_eq!(rule.max, Some(IntOrPath::Int(3)));
        assert!(rule.just_warning);
        assert!(rule.valid.is_some());
        assert_eq!(rule.values[0], StringOrPath::Str("a".into()));
        assert!(matches!(rule.values[1], StringOrPath::Path(_)));
        assert!(matches!(rule.max_length, Some(IntOrPath::Path(_))));
        assert_eq!(rule.regex, "^a");
    }

    #[test]
    fn empty_and_null_hold_no_rules_and_keys_match_without_case() {
        assert_eq!(parse_rules(""), Ok(vec![]));
        assert_eq!(parse_rules("null"), Ok(vec![]));
        assert_eq!(parse_rules("[null]"), Ok(vec![Rule::default()]));
        let rules = parse_rules(r#"[{"NAME": "a", "JustWarning": true}]"#).expect("rules");
        assert_eq!(rules[0].name, "a");
        assert!(rules[0].just_warning);
    }

    #[test]
    fn malformed_json_gets_gos_messages() {
        assert_eq!(error("[{"), "unexpected end of JSON input");
        assert_eq!(error(" "), "unexpected end of JSON input");
        assert_eq!(
            error("[x]"),
            "invalid character 'x' looking for beginning of value"
        );
        assert_eq!(
            error(r#"{"name": "a"}"#),
            "json: cannot unmarshal object into Go value of type []validation.Rule"
        );
        assert_eq!(
            error("[1]"),
            "json: cannot unmarshal number into Go value of type validation.Rule"
        );
        assert_eq!(
            error(r#"[{"rule": 5}]"#),
            "json: cannot unmarshal number into Go struct field Rule.rule of type validation.RuleType"
        );
        assert_eq!(
            error(r#"[{"justWarning": "yes"}]"#),
            "json: cannot unmarshal string into Go struct field Rule.justWarning of type bool"
        );
        assert_eq!(
            error(r#"[{"values": "virtio"}]"#),
            "json: cannot unmarshal string into Go struct field Rule.values of type []path.StringOrPath"
        );
    }

    #[test]
    fn bad_paths_and_bounds_get_upstreams_messages() {
        assert_eq!(error(r#"[{"path": ".spec.domain"}]"#), "invalid JSONPath");
        assert_eq!(error(r#"[{"path": null}]"#), "invalid JSONPath");
        assert_eq!(
            error(r#"[{"path": 3}]"#),
            "json: cannot unmarshal number into Go value of type string"
        );
        assert_eq!(
            error(r#"[{"min": "1Gi"}]"#),
            "cannot unmarshall IntOrPath from JSON: invalid JSONPath"
        );
        assert_eq!(
            error(r#"[{"max": true}]"#),
            "cannot unmarshall IntOrPath from JSON: json: cannot unmarshal bool into Go value of type string"
        );
        assert_eq!(
            error(r#"[{"values": ["jsonpath::.a[1"]}]"#),
            "unclosed array expect ]"
        );
    }

    #[test]
    fn a_path_error_wins_over_an_earlier_type_error() {
        assert_eq!(error(r#"[{"name": 1}, {"path": "x"}]"#), "invalid JSONPath");
        assert_eq!(
            error(r#"[{"name": 1}, {"name": true}]"#),
            "json: cannot unmarshal number into Go struct field Rule.name of type string"
        );
    }
}
