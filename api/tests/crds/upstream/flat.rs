//! A schema flattened to one line per field path, the form in which ours and upstream's are
//! compared and in which upstream's is kept in the repository (`api/tests/upstream-api/`).
//!
//! A path names fields with `.`, a list's items with `[]` and a map's values with `{}`
//! (`spec.template.spec.volumes[].name`, `spec.nodeSelector{}`); the root is `.`. Only what
//! decides whether a manifest is accepted is kept: the type class, whether unknown fields are
//! kept, the required fields and the enum. Descriptions, defaults and formats are not.

use std::collections::BTreeMap;

use serde_json::Value;

/// What a schema says of one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// `string`, `integer`, `number`, `boolean`, `object`, `map`, `array`, `int-or-string`,
    /// `any` (no type), `meta` (an embedded ObjectMeta, not descended) or `recursive` (a
    /// definition that contains itself, not descended again).
    pub class: String,
    /// `x-kubernetes-preserve-unknown-fields`.
    pub preserve: bool,
    pub required: Vec<String>,
    pub enumeration: Vec<String>,
}

/// Every path of a schema and what it says there.
pub type Flat = BTreeMap<String, Node>;

pub const ROOT: &str = ".";

/// Flattens `root`, resolving swagger `$ref`s into `definitions` (`Value::Null` for a CRD's
/// self-contained schema). The root's `apiVersion`, `kind` and `metadata` are left out: the
/// API server owns them.
pub fn flatten(root: &Value, definitions: &Value) -> Flat {
    let mut flat = Flat::new();
    let mut walker = Walker {
        definitions,
        out: &mut flat,
        refs: Vec::new(),
    };
    walker.walk(ROOT, root);
    flat.retain(|path, _| {
        !["apiVersion", "kind", "metadata"]
            .iter()
            .any(|skipped| path == skipped || under(path, skipped))
    });
    flat
}

struct Walker<'a> {
    definitions: &'a Value,
    out: &'a mut Flat,
    /// The `$ref`s being walked, to stop at a definition that contains itself.
    refs: Vec<String>,
}

impl Walker<'_> {
    fn walk(&mut self, path: &str, node: &Value) {
        if let Some(reference) = node["$ref"].as_str() {
            self.walk_ref(path, reference);
            return;
        }
        if path != ROOT && last_field(path) == Some("metadata") && is_object(node) {
            self.out.insert(path.to_owned(), leaf("meta"));
            return;
        }
        let class = class_of(node);
        self.out.insert(path.to_owned(), describe(node, &class));
        match class.as_str() {
            "object" => {
                for (name, child) in node["properties"].as_object().into_iter().flatten() {
                    self.walk(&child_path(path, name), child);
                }
            }
            "map" => self.walk(&format!("{}{{}}", own(path)), &node["additionalProperties"]),
            "array" => self.walk(&format!("{}[]", own(path)), &node["items"]),
            _ => {}
        }
    }

    fn walk_ref(&mut self, path: &str, reference: &str) {
        let name = reference.trim_start_matches("#/definitions/");
        if let Some(class) = well_known(name) {
            let mut node = leaf(class);
            node.preserve = name.ends_with("RawExtension");
            self.out.insert(path.to_owned(), node);
            return;
        }
        if self.refs.iter().any(|r| r == name) {
            self.out.insert(path.to_owned(), leaf("recursive"));
            return;
        }
        self.refs.push(name.to_owned());
        let definition = &self.definitions[name];
        assert!(definition.is_object(), "{path}: no definition {name}");
        self.walk(path, definition);
        self.refs.pop();
    }
}

/// Types the swagger names by reference that a CRD writes inline.
fn well_known(definition: &str) -> Option<&'static str> {
    let short = definition.rsplit('.').next().unwrap_or(definition);
    match short {
        "ObjectMeta" => Some("meta"),
        "Time" | "MicroTime" | "Duration" => Some("string"),
        "Quantity" | "IntOrString" => Some("int-or-string"),
        "RawExtension" => Some("object"),
        _ => None,
    }
}

fn leaf(class: &str) -> Node {
    Node {
        class: class.to_owned(),
        preserve: false,
        required: Vec::new(),
        enumeration: Vec::new(),
    }
}

fn describe(node: &Value, class: &str) -> Node {
    let strings = |value: &Value| -> Vec<String> {
        let mut list: Vec<String> = value
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        list.sort();
        list
    };
    Node {
        class: class.to_owned(),
        preserve: node["x-kubernetes-preserve-unknown-fields"] == true,
        required: strings(&node["required"]),
        enumeration: strings(&node["enum"]),
    }
}

/// The type class of a schema node (see [`Node::class`]).
fn class_of(node: &Value) -> String {
    if node["x-kubernetes-int-or-string"] == true
        || node["format"] == "int-or-string"
        || string_or_number(node)
        || any_of_int_and_string(node)
    {
        return "int-or-string".into();
    }
    let declared = match &node["type"] {
        Value::String(t) => t.as_str(),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or(""),
        _ => "",
    };
    let has_properties = node["properties"]
        .as_object()
        .is_some_and(|p| !p.is_empty());
    match declared {
        "object" | "" if has_properties => "object".into(),
        "object" if node["additionalProperties"].is_object() => "map".into(),
        "" => "any".into(),
        other => other.into(),
    }
}

/// Swagger's inline int-or-string: `type: [string, number]`.
fn string_or_number(node: &Value) -> bool {
    let types: Vec<&str> = node["type"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    types.contains(&"string") && (types.contains(&"integer") || types.contains(&"number"))
}

fn any_of_int_and_string(node: &Value) -> bool {
    let types: Vec<&str> = node["anyOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["type"].as_str())
        .collect();
    types.contains(&"integer") && types.contains(&"string")
}

fn is_object(node: &Value) -> bool {
    node["type"] == "object" || node["properties"].is_object()
}

/// `path` as a prefix for its children: the root has none.
fn own(path: &str) -> &str {
    if path == ROOT { "" } else { path }
}

pub fn child_path(path: &str, name: &str) -> String {
    if path == ROOT {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

/// The path one step up: `a.b[]` → `a.b`, `a.b[].c` → `a.b[]`, `a` → `.`.
pub fn parent(path: &str) -> &str {
    if let Some(p) = path.strip_suffix("[]").or_else(|| path.strip_suffix("{}")) {
        return p;
    }
    match path.rfind('.') {
        Some(i) => &path[..i],
        None => ROOT,
    }
}

/// Whether `path` lies strictly below `ancestor`.
pub fn under(path: &str, ancestor: &str) -> bool {
    if ancestor == ROOT {
        return path != ROOT;
    }
    path.strip_prefix(ancestor)
        .is_some_and(|rest| rest.starts_with(['.', '[', '{']))
}

/// The field name at the end of `path`, if it ends with one.
fn last_field(path: &str) -> Option<&str> {
    if path.ends_with("[]") || path.ends_with("{}") {
        return None;
    }
    Some(path.rsplit('.').next().unwrap_or(path))
}

/// One line of the kept form: `path<TAB>class[<TAB>preserve][<TAB>required=a,b][<TAB>enum=x|y]`.
pub fn to_line(path: &str, node: &Node) -> String {
    let mut line = format!("{path}\t{}", node.class);
    if node.preserve {
        line.push_str("\tpreserve");
    }
    if !node.required.is_empty() {
        line.push_str(&format!("\trequired={}", node.required.join(",")));
    }
    if !node.enumeration.is_empty() {
        line.push_str(&format!("\tenum={}", node.enumeration.join("|")));
    }
    line
}

/// Reads what [`to_line`] wrote, one path per line.
pub fn parse(text: &str) -> Result<Flat, String> {
    let mut flat = Flat::new();
    for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
        let mut fields = line.split('\t');
        let (Some(path), Some(class)) = (fields.next(), fields.next()) else {
            return Err(format!("line {}: no class: {line:?}", number + 1));
        };
        let mut node = leaf(class);
        for field in fields {
            match field.split_once('=') {
                None if field == "preserve" => node.preserve = true,
                Some(("required", list)) => {
                    node.required = list.split(',').map(Into::into).collect()
                }
                Some(("enum", list)) => {
                    node.enumeration = list.split('|').map(Into::into).collect()
                }
                _ => return Err(format!("line {}: unknown field {field:?}", number + 1)),
            }
        }
        flat.insert(path.to_owned(), node);
    }
    Ok(flat)
}

pub fn to_text(flat: &Flat) -> String {
    flat.iter()
        .map(|(path, node)| to_line(path, node) + "\n")
        .collect()
}
