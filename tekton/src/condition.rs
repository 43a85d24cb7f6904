//! wait-for-vmi-status's conditions: Kubernetes label-selector syntax (`status.phase ==
//! Running`, `status.phase in (Failed, Unknown)`, `!status.nodeName`, `a > 3`, commas for
//! "and") whose keys are dotted paths into the VMI, evaluated as upstream evaluates them:
//! each key's value at that path is a label of a made-up label set, which the selector
//! then matches. Written here because the selector must run over object fields, not labels.

use serde_json::Value;

/// A parsed condition: every requirement must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    path: Vec<String>,
    operator: Operator,
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// Why a condition does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    #[error("could not parse condition {condition}: {problem}")]
    Parse { condition: String, problem: String },
}

impl Condition {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Self, ConditionError> {
        let fail = |problem: String| ConditionError::Parse {
            condition: text.to_owned(),
            problem,
        };
        let tokens = tokenize(text).map_err(fail)?;
        let mut parser = Parser { tokens, at: 0 };
        let mut requirements = Vec::new();
        loop {
            requirements.push(parser.requirement().map_err(fail)?);
            match parser.next() {
                None => break,
                Some(Token::Comma) => continue,
                Some(other) => {
                    return Err(fail(format!(
                        "found '{other}', expected: ',' or 'end of string'"
                    )));
                }
            }
        }
        Ok(Self { requirements })
    }

    /// Whether `object` meets every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|r| r.matches(object))
    }
}

impl Requirement {
    fn matches(&self, object: &Value) -> bool {
        let value = lookup(object, &self.path);
        match (self.operator, value) {
            (Operator::Exists, value) => value.is_some(),
            (Operator::DoesNotExist, value) => value.is_none(),
            (Operator::In, Some(value)) => self.values.contains(&value),
            (Operator::NotIn, Some(value)) => !self.values.contains(&value),
            (Operator::NotIn, None) => true,
            (Operator::GreaterThan | Operator::LessThan, Some(value)) => {
                let (Ok(have), Ok(want)) = (value.parse::<i64>(), self.values[0].parse::<i64>())
                else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
            (_, None) => false,
        }
    }
}

/// The value at `path` as the label value upstream's JSONPath prints: strings as they are,
/// other scalars as JSON; `None` where the path leads nowhere.
fn lookup(object: &Value, path: &[String]) -> Option<String> {
    let mut at = object;
    for step in path {
        at = at.as_object()?.get(step)?;
    }
    match at {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Greater,
    Less,
    Open,
    Close,
    Comma,
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Word(w) => f.write_str(w),
            Token::Not => f.write_str("!"),
            Token::Equals => f.write_str("="),
            Token::DoubleEquals => f.write_str("=="),
            Token::NotEquals => f.write_str("!="),
            Token::Greater => f.write_str(">"),
            Token::Less => f.write_str("<"),
            Token::Open => f.write_str("("),
            Token::Close => f.write_str(")"),
            Token::Comma => f.write_str(","),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => continue,
            ',' => Token::Comma,
            '(' => Token::Open,
            ')' => Token::Close,
            '>' => Token::Greater,
            '<' => Token::Less,
            '!' if chars.peek() == Some(&'=') => {
                chars.next();
                Token::NotEquals
            }
            '!' => Token::Not,
            '=' if chars.peek() == Some(&'=') => {
                chars.next();
                Token::DoubleEquals
            }
            '=' => Token::Equals,
            c => {
                let mut word = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || ",()<>!=".contains(n) {
                        break;
                    }
                    word.push(n);
                    chars.next();
                }
                Token::Word(word)
            }
        };
        tokens.push(token);
    }
    if tokens.is_empty() {
        return Err("found 'end of string', expected: identifier".into());
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn word(&mut self, what: &str) -> Result<String, String> {
        match self.next() {
            Some(Token::Word(w)) => Ok(w),
            Some(other) => Err(format!("found '{other}', expected: {what}")),
            None => Err(format!("found 'end of string', expected: {what}")),
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let negated = self.tokens.get(self.at) == Some(&Token::Not);
        if negated {
            self.at += 1;
        }
        let key = self.word("identifier")?;
        check_key(&key)?;
        let path = key.split('.').map(str::to_owned).collect();
        let make = |operator, values| Requirement {
            path,
            operator,
            values,
        };
        if negated {
            return Ok(make(Operator::DoesNotExist, Vec::new()));
        }
        let operator = match self.tokens.get(self.at) {
            None | Some(Token::Comma) => return Ok(make(Operator::Exists, Vec::new())),
            Some(_) => self.next(),
        };
        match operator {
            Some(Token::Equals | Token::DoubleEquals) => {
                Ok(make(Operator::In, vec![self.value()?]))
            }
            Some(Token::NotEquals) => Ok(make(Operator::NotIn, vec![self.value()?])),
            Some(Token::Greater | Token::Less) => {
                let bound = self.word("integer")?;
                if bound.parse::<i64>().is_err() {
                    return Err(format!(
                        "for 'Gt', 'Lt' operators, the value must be an integer: {bound}"
                    ));
                }
                let op = if operator == Some(Token::Greater) {
                    Operator::GreaterThan
                } else {
                    Operator::LessThan
                };
                Ok(make(op, vec![bound]))
            }
            Some(Token::Word(w)) if w == "in" || w == "notin" => {
                let values = self.value_set()?;
                let op = if w == "in" {
                    Operator::In
                } else {
                    Operator::NotIn
                };
                Ok(make(op, values))
            }
            Some(other) => Err(format!(
                "found '{other}', expected: in, notin, =, ==, !=, gt, lt"
            )),
            None => unreachable!("peeked"),
        }
    }

    /// A value after `=`, `==` or `!=`: possibly empty.
    fn value(&mut self) -> Result<String, String> {
        match self.tokens.get(self.at) {
            Some(Token::Word(_)) => {
                let value = self.word("value")?;
                check_value(&value)?;
                Ok(value)
            }
            _ => Ok(String::new()),
        }
    }

    fn value_set(&mut self) -> Result<Vec<String>, String> {
        match self.next() {
            Some(Token::Open) => {}
            other => {
                let found = other.map_or("end of string".to_owned(), |t| t.to_string());
                return Err(format!("found '{found}', expected: '('"));
            }
        }
        let mut values = Vec::new();
        loop {
            match self.next() {
                Some(Token::Word(w)) => {
                    check_value(&w)?;
                    values.push(w);
                }
                Some(Token::Comma) => continue,
                Some(Token::Close) => return Ok(values),
                other => {
                    let found = other.map_or("end of string".to_owned(), |t| t.to_string());
                    return Err(format!("found '{found}', expected: ',', ')' or identifier"));
                }
            }
        }
    }
}

/// A label key: an optional DNS prefix and `/`, then a name of at most 63 characters of
/// alphanumerics, `-`, `_` and `.`, starting and ending with an alphanumeric; here its dots
/// are also the path, so no step may be empty.
fn check_key(key: &str) -> Result<(), String> {
    let name = key.rsplit_once('/').map_or(key, |(_, name)| name);
    if !is_label_value(name) || name.is_empty() {
        return Err(format!(
            "invalid label key \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ));
    }
    if key.split('.').any(str::is_empty) {
        return Err(format!(
            "invalid condition: cannot parse jsonpath {{.{key}}}: empty field name"
        ));
    }
    Ok(())
}

fn check_value(value: &str) -> Result<(), String> {
    if is_label_value(value) {
        Ok(())
    } else {
        Err(format!(
            "invalid label value: \"{value}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    value.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
        && bytes.first().is_none_or(u8::is_ascii_alphanumeric)
        && bytes.last().is_none_or(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vmi(phase: &str) -> Value {
        json!({"metadata": {"name": "vm1"}, "spec": {"domain": {}},
               "status": {"phase": phase, "ready": true, "restarts": 4}})
    }

    fn holds(condition: &str, object: &Value) -> bool {
        Condition::parse(condition).expect("parses").matches(object)
    }

    #[test]
    fn upstreams_examples_hold_as_upstream() {
        let running = vmi("Running");
        assert!(holds("status.phase == Running", &running));
        assert!(holds("status.phase = Running", &running));
        assert!(holds(
            "status.phase in (Scheduling, Running), status.phase == Running",
            &running
        ));
        assert!(!holds("status.phase in (Failed, Unknown)", &running));
        assert!(!holds(
            "status.phase == Failed, spec.running == false",
            &vmi("Failed")
        ));
        assert!(holds("metadata.name == vm1", &running));
    }

    #[test]
    fn absent_keys_follow_label_selector_semantics() {
        let running = vmi("Running");
        assert!(
            holds("status.nodeName != node01", &running),
            "!= matches an absent key"
        );
        assert!(holds("status.phase notin (Failed)", &running));
        assert!(holds("!status.nodeName", &running));
        assert!(holds("status.phase", &running));
        assert!(!holds("status.nodeName in (a)", &running));
    }

    #[test]
    fn scalars_print_as_upstream_prints_them() {
        let running = vmi("Running");
        assert!(holds("status.ready == true", &running));
        assert!(holds("status.restarts > 3, status.restarts < 5", &running));
        assert!(!holds("status.restarts > 4", &running));
    }

    #[test]
    fn bad_conditions_say_what_is_wrong() {
        let error = |c: &str| Condition::parse(c).expect_err("refused").to_string();
        assert!(
            error("test.....test").contains("cannot parse jsonpath"),
            "{}",
            error("test.....test")
        );
        assert!(error("status.phase in Running").contains("expected: '('"));
        assert!(error("status.phase > high").contains("must be an integer"));
        assert!(error("status.phase == Run ning").contains("expected: ',' or 'end of string'"));
        assert!(error("").contains("could not parse condition"));
    }
}
