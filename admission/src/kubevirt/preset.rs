//! virt-api's VirtualMachineInstancePresets (KubeVirt v1.6's
//! `pkg/virt-api/webhooks/mutating-webhook/mutators/preset.go`): when a VMI is created, every
//! preset of its namespace whose selector selects its labels is merged into its domain, in
//! the presets' order; a VMI annotated [`EXCLUSION_ANNOTATION`]`: "true"` gets none.
//!
//! Presets that conflict with one another refuse the VMI. A preset that conflicts with the
//! VMI gives what does not conflict; a preset that gave anything (or whose every field the
//! VMI already has) is recorded on the VMI as `virtualmachinepreset.kubevirt.io/NAME:
//! kubevirt.io/v1`. A VMI carrying such an annotation is answered with the deprecation
//! warning. Upstream only logs a preset's conflicts with the VMI (no event); so does this.
//!
//! The fields merged are upstream's: `resources.requests`, `cpu`, `firmware`, `clock` (its
//! offset, then its timers), `features`, `devices.watchdog` and `ioThreadsPolicy`. Conflict
//! messages name the field as upstream does; the values are printed as JSON where upstream
//! prints Go's `%v` of its structs.

use std::collections::BTreeMap;

use api::kubevirt::preset::{APPLIED_ANNOTATION_PREFIX, DEPRECATION_WARNING, EXCLUSION_ANNOTATION};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Map, Value, json};

use crate::Refusal;

/// The name of virt-api's webhook that applies presets (its VMI mutator).
pub const VMI_MUTATOR_WEBHOOK: &str = "virtualmachineinstances-mutator.kubevirt.io";
/// The name of virt-api's webhook that validates presets.
pub const PRESET_VALIDATOR_WEBHOOK: &str = "virtualmachinepreset-validator.kubevirt.io";

/// The domain fields a preset gives, each compared whole (their paths under the domain).
const WHOLE_FIELDS: [(&str, &str); 4] = [
    ("/cpu", "spec.cpu"),
    ("/firmware", "spec.firmware"),
    ("/features", "spec.features"),
    ("/devices/watchdog", "spec.devices.watchdog"),
];
const IO_THREADS_POLICY: (&str, &str) = ("/ioThreadsPolicy", "spec.ioThreadsPolicy");

/// Applies to `vmi` (a VMI being created) the presets of `presets` (its namespace's) that
/// select it; returns the deprecation warning when a preset is recorded on it, or refuses
/// it (422) when the presets conflict with one another.
pub fn apply_presets(vmi: &mut Value, presets: &[Value]) -> Result<Vec<String>, Refusal> {
    let name = vmi["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if is_excluded(vmi) {
        tracing::info!(vmi = %name, "VMI excluded from preset logic");
        return Ok(warnings(vmi));
    }
    let labels = labels_of(vmi);
    let matching: Vec<&Value> = presets
        .iter()
        .filter(|preset| selects(preset, &labels))
        .collect();
    if let Err(conflicts) = check_preset_conflicts(&matching) {
        return Err(Refusal::new(
            422,
            format!("VirtualMachinePresets cannot be applied due to conflicts: {conflicts}"),
        ));
    }
    for preset in matching {
        let preset_name = preset["metadata"]["name"].as_str().unwrap_or_default();
        let domain = &preset["spec"]["domain"];
        let vmi_domain = domain_of(vmi);
        let (applied, conflicts) = merge_domain(domain, vmi_domain);
        match (applied, conflicts) {
            (true, conflicts) => {
                if let Err(conflicts) = conflicts {
                    tracing::warn!(vmi = %name, preset = preset_name, %conflicts,
                        "some settings were not applied for VirtualMachineInstancePreset");
                }
                annotate(vmi, preset_name);
            }
            (false, conflicts) => {
                let conflicts = conflicts.err().unwrap_or_default();
                tracing::warn!(vmi = %name, preset = preset_name, %conflicts,
                    "unable to apply VirtualMachineInstancePreset");
            }
        }
    }
    Ok(warnings(vmi))
}

/// virt-api's validation of a preset: it has a domain (its message is upstream's, which
/// names no field).
pub fn validate_preset(preset: &Value) -> Result<(), Refusal> {
    if preset["spec"]["domain"].is_object() {
        return Ok(());
    }
    Err(Refusal::new(422, "missing domain."))
}

fn is_excluded(vmi: &Value) -> bool {
    vmi["metadata"]["annotations"][EXCLUSION_ANNOTATION] == "true"
}

/// The deprecation warning, when an annotation names a preset.
fn warnings(vmi: &Value) -> Vec<String> {
    let annotations = vmi["metadata"]["annotations"].as_object();
    let names_a_preset = annotations
        .into_iter()
        .flat_map(Map::keys)
        .any(|key| key.contains("virtualmachinepreset"));
    if names_a_preset {
        vec![DEPRECATION_WARNING.to_owned()]
    } else {
        Vec::new()
    }
}

fn labels_of(vmi: &Value) -> BTreeMap<String, String> {
    vmi["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
        .collect()
}

/// Whether the preset's selector selects `labels` (an unreadable selector selects none).
fn selects(preset: &Value, labels: &BTreeMap<String, String>) -> bool {
    let selector = serde_json::from_value::<LabelSelector>(preset["spec"]["selector"].clone());
    match selector {
        Ok(selector) => api::label_selector::selects(&selector, labels),
        Err(err) => {
            tracing::warn!(preset = %preset["metadata"]["name"], %err, "unreadable preset selector");
            false
        }
    }
}

/// The VMI's domain, made an object if it is not one.
fn domain_of(vmi: &mut Value) -> &mut Map<String, Value> {
    let spec = object_at(vmi, "spec");
    let domain = spec.entry("domain").or_insert_with(|| json!({}));
    if !domain.is_object() {
        *domain = json!({});
    }
    domain.as_object_mut().expect("made an object above")
}

fn object_at<'a>(value: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !value.is_object() {
        *value = json!({});
    }
    let fields = value.as_object_mut().expect("made an object above");
    let child = fields.entry(key).or_insert_with(|| json!({}));
    if !child.is_object() {
        *child = json!({});
    }
    child.as_object_mut().expect("made an object above")
}

fn annotate(vmi: &mut Value, preset_name: &str) {
    let metadata = object_at(vmi, "metadata");
    let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(
            format!("{APPLIED_ANNOTATION_PREFIX}{preset_name}"),
            json!("kubevirt.io/v1"),
        );
    }
}

/// Every pair of presets that conflict, as upstream aggregates them.
fn check_preset_conflicts(presets: &[&Value]) -> Result<(), String> {
    let mut errors = Vec::new();
    for (i, preset) in presets.iter().enumerate() {
        for visited in &presets[..i] {
            let domain = preset["spec"]["domain"].as_object();
            let visited_domain = visited["spec"]["domain"].as_object();
            if let (Some(domain), Some(visited_domain)) = (domain, visited_domain)
                && let Err(conflicts) = check_merge_conflicts(domain, visited_domain)
            {
                errors.push(format!(
                    "presets '{}' and '{}' conflict: {conflicts}",
                    preset["metadata"]["name"].as_str().unwrap_or_default(),
                    visited["metadata"]["name"].as_str().unwrap_or_default(),
                ));
            }
        }
    }
    aggregate(errors)
}

/// The fields both domains set, to different values.
fn check_merge_conflicts(
    preset: &Map<String, Value>,
    vmi: &Map<String, Value>,
) -> Result<(), String> {
    let preset = Value::Object(preset.clone());
    let vmi = Value::Object(vmi.clone());
    let mut errors = Vec::new();
    let requests = |domain: &Value| {
        domain
            .pointer("/resources/requests")
            .and_then(Value::as_object)
            .cloned()
    };
    if let (Some(preset_requests), Some(vmi_requests)) = (requests(&preset), requests(&vmi)) {
        for (key, preset_request) in &preset_requests {
            if let Some(vmi_request) = vmi_requests.get(key)
                && !same_quantity(preset_request, vmi_request)
            {
                errors.push(format!(
                    "spec.resources.requests[{key}]: {} != {}",
                    plain(preset_request),
                    plain(vmi_request)
                ));
            }
        }
    }
    // Upstream's order: cpu and firmware, the clock, then features and the watchdog.
    let (before_clock, after_clock) = WHOLE_FIELDS.split_at(2);
    for (pointer, field) in before_clock {
        conflict(&mut errors, &preset, &vmi, pointer, field);
    }
    if let (Some(preset_clock), Some(vmi_clock)) =
        (set_at(&preset, "/clock"), set_at(&vmi, "/clock"))
    {
        let (preset_offset, vmi_offset) = (clock_offset(preset_clock), clock_offset(vmi_clock));
        if !semantically_equal(&preset_offset, &vmi_offset) {
            errors.push(format!(
                "spec.clock.clockoffset: {} != {}",
                plain(&preset_offset),
                plain(&vmi_offset)
            ));
        }
        conflict(
            &mut errors,
            preset_clock,
            vmi_clock,
            "/timer",
            "spec.clock.timer",
        );
    }
    for (pointer, field) in after_clock {
        conflict(&mut errors, &preset, &vmi, pointer, field);
    }
    conflict(
        &mut errors,
        &preset,
        &vmi,
        IO_THREADS_POLICY.0,
        IO_THREADS_POLICY.1,
    );
    aggregate(errors)
}

/// A conflict when both set the field at `pointer`, to different values.
fn conflict(errors: &mut Vec<String>, preset: &Value, vmi: &Value, pointer: &str, field: &str) {
    let (Some(ours), Some(theirs)) = (set_at(preset, pointer), set_at(vmi, pointer)) else {
        return;
    };
    if !semantically_equal(ours, theirs) {
        errors.push(format!("{field}: {} != {}", plain(ours), plain(theirs)));
    }
}

/// The value at `pointer`, unless absent or null (Go's nil).
fn set_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a Value> {
    value.pointer(pointer).filter(|v| !v.is_null())
}

/// A clock without its timers: its offset (`utc` or `timezone`).
fn clock_offset(clock: &Value) -> Value {
    let mut offset = clock.as_object().cloned().unwrap_or_default();
    offset.remove("timer");
    Value::Object(offset)
}

/// Merges the preset's domain into the VMI's: a field the VMI does not set is given; returns
/// whether any field the preset sets is, afterwards, the VMI's too, and the conflicts.
fn merge_domain(preset: &Value, vmi: &mut Map<String, Value>) -> (bool, Result<(), String>) {
    let Some(preset_domain) = preset.as_object() else {
        return (false, Ok(()));
    };
    let conflicts = check_merge_conflicts(preset_domain, vmi);
    let mut applied = false;
    if let Some(requests) = set_at(preset, "/resources/requests").filter(|r| non_empty(r)) {
        let resources = object_in(vmi, "resources");
        let vmi_requests = resources.entry("requests").or_insert(Value::Null);
        if vmi_requests.is_null() {
            *vmi_requests = requests.clone();
        }
        applied |= semantically_equal(vmi_requests, requests);
    }
    for (pointer, _) in WHOLE_FIELDS.iter().chain([&IO_THREADS_POLICY]) {
        if let Some(given) = set_at(preset, pointer) {
            applied |= give(vmi, pointer, given);
        }
    }
    if let Some(preset_clock) = set_at(preset, "/clock") {
        if vmi.get("clock").is_none_or(Value::is_null) {
            vmi.insert("clock".into(), clock_offset(preset_clock));
        }
        applied |= semantically_equal(&vmi["clock"], preset_clock);
        if let Some(timer) = set_at(preset_clock, "/timer") {
            let clock = object_in(vmi, "clock");
            if clock.get("timer").is_none_or(Value::is_null) {
                clock.insert("timer".into(), timer.clone());
            }
            applied |= semantically_equal(&clock["timer"], timer);
        }
    }
    (applied, conflicts)
}

/// Sets the VMI's field at `pointer` (one or two levels under the domain) to `given` when it
/// has none; returns whether it equals `given` afterwards.
fn give(vmi: &mut Map<String, Value>, pointer: &str, given: &Value) -> bool {
    let keys: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    let (parent, key) = match keys.as_slice() {
        [key] => (&mut *vmi, *key),
        [outer, key] => (object_in(vmi, outer), *key),
        _ => return false,
    };
    let field = parent.entry(key).or_insert(Value::Null);
    if field.is_null() {
        *field = given.clone();
    }
    semantically_equal(field, given)
}

fn object_in<'a>(fields: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let child = fields.entry(key).or_insert_with(|| json!({}));
    if !child.is_object() {
        *child = json!({});
    }
    child.as_object_mut().expect("made an object above")
}

fn non_empty(value: &Value) -> bool {
    value.as_object().is_some_and(|fields| !fields.is_empty())
}

/// Equality as Kubernetes' semantic equality has it: quantities by their amount, a missing
/// list or map the same as an empty one.
fn semantically_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().all(|key| {
                let (x, y) = (
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                );
                semantically_equal(x, y)
            })
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| semantically_equal(x, y))
        }
        (Value::Null, Value::Array(items)) | (Value::Array(items), Value::Null) => items.is_empty(),
        (Value::Null, Value::Object(fields)) | (Value::Object(fields), Value::Null) => {
            fields.is_empty()
        }
        (Value::String(_), Value::String(_)) => same_quantity(a, b),
        _ => a == b,
    }
}

/// Two strings equal, or equal amounts when both are quantities.
fn same_quantity(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    match (
        a.as_str().and_then(api::quantity::parse_quantity),
        b.as_str().and_then(api::quantity::parse_quantity),
    ) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// A value in a message: a string as it is, anything else as JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Errors as Kubernetes' aggregate prints them: one alone, several in brackets.
fn aggregate(errors: Vec<String>) -> Result<(), String> {
    let mut unique: Vec<String> = Vec::new();
    for error in errors {
        if !unique.contains(&error) {
            unique.push(error);
        }
    }
    match unique.len() {
        0 => Ok(()),
        1 => Err(unique.remove(0)),
        _ => Err(format!("[{}]", unique.join(", "))),
    }
}

#[cfg(test)]
#[path = "preset_tests.rs"]
mod tests;
