//! A decoded message as the JSON kube-apiserver would store for it.
//!
//! Go clients write every field of a non-pointer Go type, empty or not, so "present" on the
//! wire does not mean "set" as it does in JSON. The rules, from Go's JSON encoding of the
//! same structs:
//! - an empty string is dropped: Go's string fields are `omitempty` unless they are pointers,
//!   and of the pointer ones only `storageClassName` gives "" a meaning ("no class");
//! - zero numbers and `false` are kept: a pointer's zero is meaningful (`replicas: 0`,
//!   `runAsUser: 0`, `automountServiceAccountToken: false`) and a non-pointer's zero reads
//!   back the same either way;
//! - a zero `Time` is dropped (Go writes it as an empty message and its JSON as null);
//! - empty lists and maps are dropped, as `omitempty` drops them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use protobuf::MessageDyn;
use protobuf::reflect::{ReflectFieldRef, ReflectValueRef};
use serde_json::{Map, Value};

use super::ProtobufError;

pub(super) const TIME: &str = "apimachinery.pkg.apis.meta.v1.Time";
pub(super) const MICRO_TIME: &str = "apimachinery.pkg.apis.meta.v1.MicroTime";
pub(super) const DURATION: &str = "apimachinery.pkg.apis.meta.v1.Duration";
pub(super) const FIELDS_V1: &str = "apimachinery.pkg.apis.meta.v1.FieldsV1";
pub(super) const QUANTITY: &str = "apimachinery.pkg.api.resource.Quantity";
pub(super) const INT_OR_STRING: &str = "apimachinery.pkg.util.intstr.IntOrString";
pub(super) const RAW_EXTENSION: &str = "apimachinery.pkg.runtime.RawExtension";

/// Fields whose Go struct is embedded with `json:",inline"`: a message on the wire, its
/// fields merged into the parent's object in JSON. (Message, field) of every served group
/// version's.
const INLINE_FIELDS: &[(&str, &str)] = &[
    ("api.core.v1.Volume", "volumeSource"),
    ("api.core.v1.PersistentVolumeSpec", "persistentVolumeSource"),
    ("api.core.v1.Probe", "handler"),
    ("api.core.v1.EphemeralContainer", "ephemeralContainerCommon"),
    ("api.core.v1.ConfigMapEnvSource", "localObjectReference"),
    ("api.core.v1.ConfigMapKeySelector", "localObjectReference"),
    ("api.core.v1.ConfigMapProjection", "localObjectReference"),
    ("api.core.v1.ConfigMapVolumeSource", "localObjectReference"),
    ("api.core.v1.SecretEnvSource", "localObjectReference"),
    ("api.core.v1.SecretKeySelector", "localObjectReference"),
    ("api.core.v1.SecretProjection", "localObjectReference"),
    (
        "api.admissionregistration.v1.NamedRuleWithOperations",
        "ruleWithOperations",
    ),
    ("api.admissionregistration.v1.RuleWithOperations", "rule"),
];

/// Whether `field` of `message` (a full name) is inlined in JSON.
pub(super) fn is_inline(message: &str, field: &str) -> bool {
    INLINE_FIELDS.contains(&(message, field))
}

/// The one string field whose empty value means something.
pub(super) const EMPTY_STRING_MEANS_SOMETHING: &str = "storageClassName";

/// `message` as JSON; `path` names it in errors (`Pod.spec.containers`).
pub fn message(message: &dyn MessageDyn, path: &str) -> Result<Value, ProtobufError> {
    let descriptor = message.descriptor_dyn();
    match descriptor.full_name() {
        TIME => return Ok(time(message, false)),
        MICRO_TIME => return Ok(time(message, true)),
        QUANTITY => return Ok(Value::String(string_field(message, "string"))),
        INT_OR_STRING => return Ok(int_or_string(message)),
        RAW_EXTENSION => return embedded_json(message, "raw", path),
        FIELDS_V1 => return embedded_json(message, "Raw", path),
        DURATION => {
            return Err(ProtobufError::field(
                path,
                "metav1.Duration is not translated by this server",
            ));
        }
        _ => {}
    }
    let mut object = Map::new();
    for field in descriptor.fields() {
        let name = field.name();
        let path = format!("{path}.{name}");
        let value = match field.get_reflect(message) {
            ReflectFieldRef::Optional(optional) => match optional.value() {
                Some(ReflectValueRef::String("")) if name != EMPTY_STRING_MEANS_SOMETHING => {
                    continue;
                }
                Some(value) => singular(value, &path)?,
                None => continue,
            },
            ReflectFieldRef::Repeated(items) if items.is_empty() => continue,
            ReflectFieldRef::Repeated(items) => Value::Array(
                items
                    .into_iter()
                    .map(|item| singular(item, &path))
                    .collect::<Result<_, _>>()?,
            ),
            ReflectFieldRef::Map(entries) if entries.is_empty() => continue,
            ReflectFieldRef::Map(entries) => {
                let mut map = Map::new();
                for (key, value) in &entries {
                    let key = match key {
                        ReflectValueRef::String(key) => key.to_string(),
                        other => other.to_string(),
                    };
                    map.insert(key, singular(value, &path)?);
                }
                Value::Object(map)
            }
        };
        match value {
            Value::Null => {}
            Value::Object(inlined) if is_inline(descriptor.full_name(), name) => {
                object.extend(inlined);
            }
            value => {
                object.insert(name.to_string(), value);
            }
        }
    }
    Ok(Value::Object(object))
}

fn singular(value: ReflectValueRef, path: &str) -> Result<Value, ProtobufError> {
    Ok(match value {
        ReflectValueRef::U32(n) => n.into(),
        ReflectValueRef::U64(n) => n.into(),
        ReflectValueRef::I32(n) => n.into(),
        ReflectValueRef::I64(n) => n.into(),
        ReflectValueRef::F32(n) => float(f64::from(n), path)?,
        ReflectValueRef::F64(n) => float(n, path)?,
        ReflectValueRef::Bool(b) => b.into(),
        ReflectValueRef::String(s) => s.into(),
        ReflectValueRef::Bytes(bytes) => STANDARD.encode(bytes).into(),
        ReflectValueRef::Enum(descriptor, number) => match descriptor.value_by_number(number) {
            Some(value) => value.name().into(),
            None => number.into(),
        },
        ReflectValueRef::Message(inner) => message(&*inner, path)?,
    })
}

fn float(n: f64, path: &str) -> Result<Value, ProtobufError> {
    serde_json::Number::from_f64(n)
        .map(Value::Number)
        .ok_or_else(|| ProtobufError::field(path, format!("{n} is not a JSON number")))
}

/// RFC 3339 in UTC, to the second (`Time`) or the microsecond (`MicroTime`); null when zero.
fn time(message: &dyn MessageDyn, micro: bool) -> Value {
    let seconds = i64_field(message, "seconds");
    let nanos = i64_field(message, "nanos");
    if seconds == 0 && nanos == 0 {
        return Value::Null;
    }
    let Ok(at) = jiff::Timestamp::from_second(seconds) else {
        return Value::Null;
    };
    let whole = at.strftime("%Y-%m-%dT%H:%M:%S");
    if micro {
        format!("{whole}.{:06}Z", nanos.clamp(0, 999_999_999) / 1000).into()
    } else {
        format!("{whole}Z").into()
    }
}

/// `type` 0 is the integer, 1 the string.
fn int_or_string(message: &dyn MessageDyn) -> Value {
    if i64_field(message, "type") == 1 {
        Value::String(string_field(message, "strVal"))
    } else {
        i64_field(message, "intVal").into()
    }
}

/// A field that carries JSON text (`RawExtension.raw`, `FieldsV1.Raw`) as that JSON.
fn embedded_json(
    message: &dyn MessageDyn,
    field: &str,
    path: &str,
) -> Result<Value, ProtobufError> {
    let bytes = match field_value(message, field) {
        Some(ReflectValueRef::Bytes(bytes)) => bytes.to_vec(),
        _ => return Ok(Value::Null),
    };
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        ProtobufError::field(
            path,
            format!("the embedded object is not JSON ({e}); only JSON is read here"),
        )
    })
}

fn field_value<'a>(message: &'a dyn MessageDyn, name: &str) -> Option<ReflectValueRef<'a>> {
    message
        .descriptor_dyn()
        .field_by_name(name)?
        .get_singular(message)
}

fn i64_field(message: &dyn MessageDyn, name: &str) -> i64 {
    match field_value(message, name) {
        Some(ReflectValueRef::I64(n)) => n,
        Some(ReflectValueRef::I32(n)) => n.into(),
        _ => 0,
    }
}

fn string_field(message: &dyn MessageDyn, name: &str) -> String {
    match field_value(message, name) {
        Some(ReflectValueRef::String(s)) => s.to_string(),
        _ => String::new(),
    }
}
