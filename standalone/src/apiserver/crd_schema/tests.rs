use serde_json::{Value, json};

use super::CrdSchemas;

/// A CRD of one version `v1` with `schema` as its openAPIV3Schema.
fn crd(schema: Value) -> Value {
    json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}})
}

fn spec_schema(spec: Value) -> CrdSchemas {
    let schema = json!({"type": "object", "properties": {"spec": spec}});
    CrdSchemas::compile(&crd(schema)).expect("compiles")
}

fn errors(schemas: &CrdSchemas, spec: Value) -> Vec<String> {
    let object =
        json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}, "spec": spec});
    schemas.validate("v1", &object, None)
}

#[test]
fn types_enums_bounds_lengths_and_patterns_are_named_by_path() {
    let schemas = spec_schema(json!({
        "type": "object",
        "required": ["mode"],
        "properties": {
            "mode": {"type": "string", "enum": ["Always", "Manual"]},
            "ratio": {"type": "integer", "minimum": 1},
            "name": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
            "items": {"type": "array", "maxItems": 1, "items": {"type": "integer"}},
            "size": {"x-kubernetes-int-or-string": true},
        },
    }));
    assert!(
        errors(
            &schemas,
            json!({"mode": "Always", "ratio": 1, "size": "1Gi"})
        )
        .is_empty()
    );
    assert!(errors(&schemas, json!({"mode": "Manual", "size": 3})).is_empty());
    let found = errors(
        &schemas,
        json!({"mode": "Allways", "ratio": 0, "name": "Abcd", "items": [1, "two"]}),
    );
    assert_eq!(
        found,
        vec![
            "spec.items: Too many: 2: must have at most 1 items",
            "spec.items[1]: Invalid value: \"string\": spec.items[1] in body must be of type integer: \"string\"",
            "spec.mode: Unsupported value: \"Allways\": supported values: \"Always\", \"Manual\"",
            "spec.name: Too long: may not be more than 3 bytes",
            "spec.name: Invalid value: \"Abcd\": spec.name in body should match '^[a-z]+$'",
            "spec.ratio: Invalid value: 0: spec.ratio in body should be greater than or equal to 1",
        ]
    );
    assert_eq!(
        errors(&schemas, json!({})),
        vec!["spec.mode: Required value"]
    );
    assert_eq!(
        errors(&schemas, json!("text")),
        vec!["spec: Invalid value: \"string\": spec in body must be of type object: \"string\""]
    );
}

#[test]
fn nulls_and_the_envelope_are_not_judged() {
    let schemas = spec_schema(json!({
        "type": "object",
        "properties": {"mode": {"type": "string"}},
    }));
    assert!(errors(&schemas, json!({"mode": null})).is_empty());
}

#[test]
fn cel_rules_report_their_message_at_their_node() {
    let schemas = spec_schema(json!({
        "type": "object",
        "properties": {
            "pool": {
                "type": "object",
                "properties": {"start": {"type": "string"}, "end": {"type": "string"}},
                "x-kubernetes-validations": [{
                    "rule": "(has(self.start) && has(self.end)) || (!has(self.start) && !has(self.end))",
                    "message": "both start and end, or neither",
                }],
            },
            "gates": {
                "type": "array",
                "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                "x-kubernetes-validations": [{
                    "rule": "self.all(x, self.exists_one(y, x.name.lowerAscii() == y.name.lowerAscii()))",
                    "message": "names must be unique",
                }],
            },
            "ratio": {
                "type": "integer",
                "x-kubernetes-validations": [{"rule": "self + 1 > 2"}],
            },
        },
    }));
    assert!(
        errors(
            &schemas,
            json!({"pool": {"start": "a", "end": "b"}, "gates": [{"name": "A"}], "ratio": 2})
        )
        .is_empty()
    );
    assert_eq!(
        errors(
            &schemas,
            json!({"pool": {"start": "a"}, "gates": [{"name": "A"}, {"name": "a"}], "ratio": 1})
        ),
        vec![
            "spec.gates: Invalid value: \"array\": names must be unique",
            "spec.pool: Invalid value: \"object\": both start and end, or neither",
            "spec.ratio: Invalid value: \"integer\": failed rule: self + 1 > 2",
        ]
    );
}

#[test]
fn transition_rules_judge_updates_only_and_unchanged_values_ratchet() {
    let schemas = spec_schema(json!({
        "type": "object",
        "properties": {
            "immutable": {
                "type": "string",
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "is immutable", "reason": "FieldValueForbidden"}],
            },
            "ratio": {"type": "integer", "minimum": 1},
        },
    }));
    let object = |immutable: &str, ratio: i64| json!({"metadata": {"name": "n"}, "spec": {"immutable": immutable, "ratio": ratio}});
    // Created: the transition rule has nothing to compare with.
    assert_eq!(
        schemas.validate("v1", &object("a", 0), None),
        vec![
            "spec.ratio: Invalid value: 0: spec.ratio in body should be greater than or equal to 1"
        ]
    );
    // An invalid value stored before is left alone while the update does not touch it.
    assert!(
        schemas
            .validate("v1", &object("a", 0), Some(&object("a", 0)))
            .is_empty()
    );
    assert_eq!(
        schemas.validate("v1", &object("b", 0), Some(&object("a", 0))),
        vec!["spec.immutable: Forbidden: is immutable"]
    );
}

#[test]
fn message_expressions_and_field_paths_shape_the_error() {
    let schemas = spec_schema(json!({
        "type": "object",
        "x-kubernetes-validations": [{
            "rule": "self.min <= self.max",
            "messageExpression": "'min ' + string(self.min) + ' is above max ' + string(self.max)",
            "fieldPath": ".min",
        }],
    }));
    assert_eq!(
        errors(&schemas, json!({"min": 3, "max": 2})),
        vec!["spec.min: Invalid value: \"object\": min 3 is above max 2"]
    );
}

#[test]
fn a_rule_failing_to_evaluate_is_an_error_naming_the_rule() {
    let schemas = spec_schema(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.missing > 1"}],
    }));
    let found = errors(&schemas, json!({}));
    assert_eq!(found.len(), 1);
    assert!(
        found[0].starts_with("spec: Invalid value: \"object\": "),
        "{found:?}"
    );
    assert!(
        found[0].ends_with("evaluating rule: self.missing > 1"),
        "{found:?}"
    );
}

#[test]
fn a_crd_whose_rule_or_pattern_does_not_compile_is_refused_by_place() {
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.a =="}],
        "properties": {"name": {"type": "string", "pattern": "(["}},
    }}});
    let errors = CrdSchemas::compile(&crd(schema)).expect_err("refused");
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].starts_with(
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: \"self.a ==\": compilation failed"
    ), "{errors:?}");
    assert!(errors[1].starts_with(
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[name].pattern: Invalid value"
    ), "{errors:?}");
}

#[test]
fn map_lists_ratchet_by_key() {
    let schemas = spec_schema(json!({
        "type": "object",
        "properties": {"pools": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {
                "name": {"type": "string"},
                "size": {"type": "integer", "minimum": 1},
            }},
        }},
    }));
    let object = |pools: Value| json!({"metadata": {"name": "n"}, "spec": {"pools": pools}});
    let old = object(json!([{"name": "a", "size": 0}]));
    // A new pool in front of the stored one: the stored one keeps its old size.
    let new = object(json!([{"name": "b", "size": 2}, {"name": "a", "size": 0}]));
    assert!(schemas.validate("v1", &new, Some(&old)).is_empty());
    let bad = object(json!([{"name": "b", "size": 0}, {"name": "a", "size": 0}]));
    assert_eq!(
        schemas.validate("v1", &bad, Some(&old)),
        vec![
            "spec.pools[0].size: Invalid value: 0: spec.pools[0].size in body should be greater than or equal to 1"
        ]
    );
}

#[test]
fn a_rule_calling_a_kubernetes_library_function_this_server_lacks_is_not_judged() {
    let schemas = spec_schema(json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "quantity(self.size).isGreaterThan(quantity('1Gi'))", "message": "too small"},
            {"rule": "has(self.size)", "message": "size is required"},
        ],
    }));
    assert!(errors(&schemas, json!({"size": "1Mi"})).is_empty());
    assert_eq!(
        errors(&schemas, json!({})),
        vec!["spec: Invalid value: \"object\": size is required"],
        "the rules it can evaluate still are"
    );
}

#[test]
fn a_field_path_from_the_root_names_the_field() {
    let schema = json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "has(self.spec)", "message": "spec is required", "fieldPath": ".spec"}],
    });
    let schemas = CrdSchemas::compile(&crd(schema)).expect("compiles");
    assert_eq!(
        schemas.validate("v1", &json!({"metadata": {"name": "n"}}), None),
        vec!["spec: Invalid value: \"object\": spec is required"]
    );
}

#[test]
fn a_crd_whose_default_its_schema_refuses_is_refused_by_place() {
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {
            "replicas": {"type": "integer", "minimum": 1, "default": 0},
            "mode": {"type": "string", "default": 3},
            "strategy": {
                "type": "object",
                "default": {"type": "Rolling", "typo": true},
                "properties": {"type": {"type": "string"}},
            },
            "fine": {"type": "object", "default": {"type": "x"},
                "properties": {"type": {"type": "string"}}},
        },
    }}});
    let refused = CrdSchemas::compile(&crd(schema)).expect_err("refused");
    let place = "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties";
    assert_eq!(
        refused,
        vec![
            format!(
                "{place}[mode].default: Invalid value: \"integer\": {place}[mode].default in body must be of type string: \"integer\""
            ),
            format!(
                "{place}[replicas].default: Invalid value: 0: {place}[replicas].default in body should be greater than or equal to 1"
            ),
            format!(
                "{place}[strategy].default: Invalid value: {{\"type\":\"Rolling\",\"typo\":true}}: must not have unknown fields, got: typo"
            ),
        ]
    );
}

#[test]
fn defaults_are_given_at_the_version_asked_for() {
    let schemas = spec_schema(json!({
        "type": "object",
        "properties": {"replicas": {"type": "integer", "default": 1}},
    }));
    let mut object = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {}, "spec": {}});
    schemas.default("v2", &mut object);
    assert_eq!(object["spec"], json!({}));
    schemas.default("v1", &mut object);
    assert_eq!(object["spec"], json!({"replicas": 1}));
}
