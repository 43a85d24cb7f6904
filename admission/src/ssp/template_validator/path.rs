//! The paths of validation rules: `jsonpath::` followed by a Kubernetes JSONPath relative to
//! the VM's `.spec.template` (`jsonpath::.spec.domain.devices.disks[*].disk.bus`), parsed once
//! and looked up on a VM as upstream's `client-go/util/jsonpath` looks it up on the typed VM.
//!
//! The subset taken: `.field`, `['field']`, `[*]`, `[N]` (negative from the end) and
//! `[start:end:step]`; recursive descent, wildcards, unions and filters are refused by name.

use serde_json::Value;

use super::shape::{Shape, VIRTUAL_MACHINE};

/// What marks a string as a path (`path.JSONPathPrefix`).
pub const JSONPATH_PREFIX: &str = "jsonpath::";

/// Where every rule path starts: rules see the VM's instance template.
const BASE: &str = ".spec.template";

/// Why a path is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The text does not start with `jsonpath::`, or the path does not resolve on the VM
    /// (upstream reports both as `ErrInvalidJSONPath`).
    #[error("invalid JSONPath")]
    Invalid,
    /// The JSONPath does not parse.
    #[error("{0}")]
    Syntax(String),
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// A field of an object, or a key of a map.
    Field(String),
    /// Items of a list: `[*]`, `[N]` or a slice.
    Items(Slice),
}

/// `[start:end:step]`, each optional; `single` for `[N]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slice {
    start: Option<i64>,
    end: Option<i64>,
    step: Option<i64>,
    single: bool,
}

/// A parsed rule path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulePath {
    expr: String,
    steps: Vec<Step>,
}

/// A value a path reaches, with its Go type when known.
#[derive(Debug, Clone)]
pub struct Found {
    pub value: Value,
    pub shape: Option<&'static Shape>,
}

/// True when `text` is meant as a path rather than a literal.
pub fn is_path(text: &str) -> bool {
    text.starts_with(JSONPATH_PREFIX)
}

impl RulePath {
    /// Parses `jsonpath::EXPR` (a leading `$` of EXPR is dropped: paths are relative).
    pub fn parse(text: &str) -> Result<Self, PathError> {
        let expr = text
            .strip_prefix(JSONPATH_PREFIX)
            .ok_or(PathError::Invalid)?;
        let expr = expr.strip_prefix('$').unwrap_or(expr);
        let steps = parse_steps(&format!("{BASE}{expr}"))?;
        Ok(Self {
            expr: expr.to_owned(),
            steps,
        })
    }

    /// The path as the rule wrote it, without its prefix: the `field` of a denial.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// The values the path reaches on `vm`, or [`PathError::Invalid`] when it does not
    /// resolve (a missing field, an index out of range, a list step on a non-list).
    pub fn find(&self, vm: &Value) -> Result<Vec<Found>, PathError> {
        let mut found = vec![Found {
            value: vm.clone(),
            shape: Some(&VIRTUAL_MACHINE),
        }];
        for step in &self.steps {
            found = match step {
                Step::Field(name) => field(found, name)?,
                Step::Items(slice) => items(found, slice)?,
            };
        }
        Ok(found)
    }
}

fn parse_steps(text: &str) -> Result<Vec<Step>, PathError> {
    let mut steps = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        match c {
            '.' if rest[1..].starts_with('.') => {
                return Err(unsupported("recursive descent (..)"));
            }
            '.' => {
                let (name, tail) = field_name(&rest[1..]);
                match name.as_str() {
                    "" => return Err(PathError::Syntax(format!("missing field name in {text}"))),
                    "*" => return Err(unsupported("the wildcard .*")),
                    _ => steps.push(Step::Field(name)),
                }
                rest = tail;
            }
            '[' => {
                let close = rest
                    .find(']')
                    .ok_or_else(|| PathError::Syntax("unclosed array expect ]".to_owned()))?;
                steps.push(bracket(&rest[1..close])?);
                rest = &rest[close + 1..];
            }
            other => {
                return Err(PathError::Syntax(format!(
                    "unrecognized character in action: U+{:04X} '{other}'",
                    u32::from(other)
                )));
            }
        }
    }
    Ok(steps)
}

/// The field name at the start of `text` (up to `.`, `[` or `]`; `\.` escapes a dot) and
/// what follows it.
fn field_name(text: &str) -> (String, &str) {
    let mut name = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' if matches!(chars.peek(), Some((_, '.'))) => {
                name.push('.');
                chars.next();
            }
            '.' | '[' | ']' => return (name, &text[at..]),
            other => name.push(other),
        }
    }
    (name, "")
}

/// The step a bracket holds: `*`, a quoted key, an index or a slice.
fn bracket(inner: &str) -> Result<Step, PathError> {
    let inner = inner.trim();
    if inner == "*" {
        return Ok(Step::Items(Slice {
            start: None,
            end: None,
            step: None,
            single: false,
        }));
    }
    for quote in ['\'', '"'] {
        if let Some(key) = inner
            .strip_prefix(quote)
            .and_then(|s| s.strip_suffix(quote))
        {
            return Ok(Step::Field(key.to_owned()));
        }
    }
    if inner.starts_with('?') {
        return Err(unsupported("filters [?()]"));
    }
    if inner.contains(',') {
        return Err(unsupported("unions [a,b]"));
    }
    let parts: Vec<&str> = inner.split(':').collect();
    if parts.len() > 3 {
        return Err(PathError::Syntax(format!("invalid array index {inner}")));
    }
    let number = |part: &str| -> Result<Option<i64>, PathError> {
        let part = part.trim();
        if part.is_empty() {
            return Ok(None);
        }
        part.parse()
            .map(Some)
            .map_err(|_| PathError::Syntax(format!("invalid array index {part}")))
    };
    Ok(Step::Items(Slice {
        start: number(parts[0])?,
        end: parts.get(1).map(|p| number(p)).transpose()?.flatten(),
        step: parts.get(2).map(|p| number(p)).transpose()?.flatten(),
        single: parts.len() == 1,
    }))
}

fn unsupported(what: &str) -> PathError {
    PathError::Syntax(format!("{what} is not supported in validation paths"))
}

/// One field step: a present field; a value field's zero when the JSON leaves it out; a
/// pointer left out is skipped. Nothing found from something is an error, as upstream's.
fn field(input: Vec<Found>, name: &str) -> Result<Vec<Found>, PathError> {
    if input.is_empty() {
        return Ok(input);
    }
    let mut out = Vec::new();
    for item in input {
        let Value::Object(map) = &item.value else {
            continue;
        };
        let present = map.get(name).filter(|v| !v.is_null());
        match (item.shape, present) {
            (Some(Shape::Map(elem)), Some(value)) => out.push(Found {
                value: value.clone(),
                shape: Some(elem),
            }),
            (Some(Shape::Map(_)), None) => {}
            (Some(shape), Some(value)) => out.push(Found {
                value: value.clone(),
                shape: shape.field(name).map(|f| f.shape),
            }),
            (Some(shape), None) => {
                if let Some(f) = shape.field(name).filter(|f| !f.pointer) {
                    out.push(Found {
                        value: f.shape.zero(),
                        shape: Some(f.shape),
                    });
                }
            }
            (None, Some(value)) => out.push(Found {
                value: value.clone(),
                shape: None,
            }),
            (None, None) => {}
        }
    }
    if out.is_empty() {
        return Err(PathError::Invalid);
    }
    Ok(out)
}

/// One list step over every input list.
fn items(input: Vec<Found>, slice: &Slice) -> Result<Vec<Found>, PathError> {
    let mut out = Vec::new();
    for item in input {
        let list = match &item.value {
            Value::Null => continue,
            Value::Array(list) => list,
            _ => return Err(PathError::Invalid),
        };
        let elem = match item.shape {
            Some(Shape::List(_, elem)) => Some(*elem),
            _ => None,
        };
        for value in select(list, slice)? {
            out.push(Found {
                value: value.clone(),
                shape: elem,
            });
        }
    }
    Ok(out)
}

/// The items of `list` a slice selects, with upstream's bounds checks.
fn select<'a>(list: &'a [Value], slice: &Slice) -> Result<Vec<&'a Value>, PathError> {
    let len = i64::try_from(list.len()).map_err(|_| PathError::Invalid)?;
    let mut start = slice.start.unwrap_or(0);
    if start < 0 {
        start += len;
    }
    let end = match (slice.single, slice.end) {
        (true, _) => start + 1,
        (false, Some(end)) if end < 0 => end + len,
        (false, Some(end)) => end,
        (false, None) => len,
    };
    if start == end {
        return Ok(Vec::new());
    }
    if start < 0 || start >= len || end < 0 || end > len || start > end {
        return Err(PathError::Invalid);
    }
    let step = slice.step.unwrap_or(1);
    if step <= 0 {
        return Err(PathError::Invalid);
    }
    let (start, end, step) = (
        usize::try_from(start).map_err(|_| PathError::Invalid)?,
        usize::try_from(end).map_err(|_| PathError::Invalid)?,
        usize::try_from(step).map_err(|_| PathError::Invalid)?,
    );
    Ok(list[start..end].iter().step_by(step).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vm() -> Value {
        json!({"spec": {"template": {"spec": {"domain": {
            "cpu": {"sockets": 2},
            "devices": {"disks": [
                {"name": "root", "disk": {"bus": "virtio"}},
                {"name": "cd", "cdrom": {"bus": "sata"}},
                {"name": "data", "disk": {}},
            ]},
            "resources": {"requests": {"memory": "1Gi"}},
        }}}}})
    }

    fn values(path: &str, vm: &Value) -> Result<Vec<Value>, PathError> {
        let found = RulePath::parse(path)?.find(vm)?;
        Ok(found.into_iter().map(|f| f.value).collect())
    }

    #[test]
    fn paths_need_their_prefix_and_are_relative_to_the_template() {
        assert_eq!(RulePath::parse(".spec.domain"), Err(PathError::Invalid));
        let path = RulePath::parse("jsonpath::$.spec.domain.cpu").expect("a path");
        assert_eq!(path.expr(), ".spec.domain.cpu");
        assert_eq!(
            values("jsonpath::.spec.domain.cpu.sockets", &vm()),
            Ok(vec![json!(2)])
        );
    }

    #[test]
    fn lists_take_star_indexes_and_slices() {
        let buses = values("jsonpath::.spec.domain.devices.disks[*].disk.bus", &vm());
        // The third disk's bus is left out: a Go string field reads as "".
        assert_eq!(buses, Ok(vec![json!("virtio"), json!("")]));
        let names = |p: &str| {
            values(
                &format!("jsonpath::.spec.domain.devices.disks{p}.name"),
                &vm(),
            )
        };
        assert_eq!(names("[1]"), Ok(vec![json!("cd")]));
        assert_eq!(names("[-1]"), Ok(vec![json!("data")]));
        assert_eq!(names("[0:2]"), Ok(vec![json!("root"), json!("cd")]));
        assert_eq!(names("[::2]"), Ok(vec![json!("root"), json!("data")]));
        assert_eq!(names("[3]"), Err(PathError::Invalid));
        assert_eq!(names("['0']"), Err(PathError::Invalid));
    }

    #[test]
    fn value_fields_read_as_zero_and_pointers_as_missing() {
        // cpu is present, cores is not: a Go uint32 reads as 0.
        assert_eq!(
            values("jsonpath::.spec.domain.cpu.cores", &vm()),
            Ok(vec![json!(0)])
        );
        // memory is a pointer: missing.
        assert_eq!(
            values("jsonpath::.spec.domain.memory.guest", &vm()),
            Err(PathError::Invalid)
        );
        // A map key that is absent is missing.
        assert_eq!(
            values("jsonpath::.spec.domain.resources.limits.memory", &vm()),
            Err(PathError::Invalid)
        );
        assert_eq!(
            values("jsonpath::.spec.domain.resources.requests['memory']", &vm()),
            Ok(vec![json!("1Gi")])
        );
        assert_eq!(
            values("jsonpath::.spec.nope", &vm()),
            Err(PathError::Invalid)
        );
    }

    #[test]
    fn unsupported_syntax_is_refused_by_name() {
        let err = |p: &str| RulePath::parse(p).expect_err("refused").to_string();
        assert_eq!(err("jsonpath::.spec.domain[0"), "unclosed array expect ]");
        assert!(err("jsonpath::..spec").contains("recursive descent"));
        assert!(err("jsonpath::.spec.*").contains("wildcard"));
        assert!(err("jsonpath::.spec[?(@.a)]").contains("filters"));
        assert!(err("jsonpath::.spec[x]").contains("invalid array index x"));
        assert_eq!(
            err("jsonpath::.a[0]!"),
            "unrecognized character in action: U+0021 '!'"
        );
    }

    #[test]
    fn an_empty_list_gives_nothing_rather_than_an_error() {
        let vm = json!({"spec": {"template": {"spec": {"domain": {"devices": {}}}}}});
        assert_eq!(
            values("jsonpath::.spec.domain.devices.disks[*].disk.bus", &vm),
            Ok(vec![])
        );
    }
}
