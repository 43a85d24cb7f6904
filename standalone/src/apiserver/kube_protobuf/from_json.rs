//! A stored JSON object as its message, for clients that asked for protobuf.
//!
//! Fields the message does not have (`apiVersion` and `kind`, which travel in the envelope;
//! fields of a newer Kubernetes) are left out, as a Go client's typed struct would drop them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use protobuf::MessageDyn;
use protobuf::reflect::{MessageDescriptor, ReflectValueBox, RuntimeFieldType, RuntimeType};
use serde_json::Value;

use super::ProtobufError;
use super::to_json::{
    DURATION, FIELDS_V1, INT_OR_STRING, MICRO_TIME, QUANTITY, RAW_EXTENSION, TIME, is_inline,
};

/// `value` as a message of `descriptor`; `path` names it in errors.
pub fn message(
    descriptor: &MessageDescriptor,
    value: &Value,
    path: &str,
) -> Result<Box<dyn MessageDyn>, ProtobufError> {
    let mut message = descriptor.new_instance();
    match descriptor.full_name() {
        TIME => set_time(&mut *message, value, false, path)?,
        MICRO_TIME => set_time(&mut *message, value, true, path)?,
        QUANTITY => {
            let quantity = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => {
                    return Err(ProtobufError::field(
                        path,
                        "a quantity must be a string or a number",
                    ));
                }
            };
            set(&mut *message, "string", ReflectValueBox::String(quantity));
        }
        INT_OR_STRING => match value {
            Value::String(s) => {
                set(&mut *message, "type", ReflectValueBox::I64(1));
                set(&mut *message, "strVal", ReflectValueBox::String(s.clone()));
            }
            Value::Number(n) => {
                let n = n
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| {
                        ProtobufError::field(path, format!("{n} is not a 32-bit integer"))
                    })?;
                set(&mut *message, "type", ReflectValueBox::I64(0));
                set(&mut *message, "intVal", ReflectValueBox::I32(n));
            }
            _ => {
                return Err(ProtobufError::field(
                    path,
                    "expected an integer or a string",
                ));
            }
        },
        RAW_EXTENSION => set(
            &mut *message,
            "raw",
            ReflectValueBox::Bytes(value.to_string().into_bytes()),
        ),
        FIELDS_V1 => set(
            &mut *message,
            "Raw",
            ReflectValueBox::Bytes(value.to_string().into_bytes()),
        ),
        DURATION => {
            return Err(ProtobufError::field(
                path,
                "metav1.Duration is not translated by this server",
            ));
        }
        _ => fill(descriptor, &mut *message, value, path)?,
    }
    Ok(message)
}

fn fill(
    descriptor: &MessageDescriptor,
    message: &mut dyn MessageDyn,
    value: &Value,
    path: &str,
) -> Result<(), ProtobufError> {
    let Value::Object(object) = value else {
        return Err(ProtobufError::field(
            path,
            format!("expected an object, found {value}"),
        ));
    };
    for field in descriptor.fields() {
        if !is_inline(descriptor.full_name(), field.name()) {
            continue;
        }
        let RuntimeType::Message(inlined) = field.singular_runtime_type() else {
            continue;
        };
        let inner = self::message(&inlined, value, &format!("{path}.{}", field.name()))?;
        field.set_singular_field(message, ReflectValueBox::Message(inner));
    }
    for (name, value) in object {
        let Some(field) = descriptor.field_by_name(name) else {
            continue;
        };
        if value.is_null() {
            continue;
        }
        let path = format!("{path}.{name}");
        match field.runtime_field_type() {
            RuntimeFieldType::Singular(kind) => {
                field.set_singular_field(message, boxed(&kind, value, &path)?);
            }
            RuntimeFieldType::Repeated(kind) => {
                let Value::Array(items) = value else {
                    return Err(ProtobufError::field(&path, "expected a list"));
                };
                for item in items {
                    let item = boxed(&kind, item, &path)?;
                    field.mut_repeated(message).push(item);
                }
            }
            RuntimeFieldType::Map(_, kind) => {
                let Value::Object(entries) = value else {
                    return Err(ProtobufError::field(&path, "expected a map"));
                };
                for (key, item) in entries {
                    let item = boxed(&kind, item, &path)?;
                    field
                        .mut_map(message)
                        .insert(ReflectValueBox::String(key.clone()), item);
                }
            }
        }
    }
    Ok(())
}

fn boxed(kind: &RuntimeType, value: &Value, path: &str) -> Result<ReflectValueBox, ProtobufError> {
    let wrong = || ProtobufError::field(path, format!("{value} is not a valid {kind:?}"));
    let int = || value.as_i64().ok_or_else(wrong);
    Ok(match kind {
        RuntimeType::I32 => ReflectValueBox::I32(int()?.try_into().map_err(|_| wrong())?),
        RuntimeType::I64 => ReflectValueBox::I64(int()?),
        RuntimeType::U32 => ReflectValueBox::U32(int()?.try_into().map_err(|_| wrong())?),
        RuntimeType::U64 => ReflectValueBox::U64(value.as_u64().ok_or_else(wrong)?),
        RuntimeType::F32 => ReflectValueBox::F32(value.as_f64().ok_or_else(wrong)? as f32),
        RuntimeType::F64 => ReflectValueBox::F64(value.as_f64().ok_or_else(wrong)?),
        RuntimeType::Bool => ReflectValueBox::Bool(value.as_bool().ok_or_else(wrong)?),
        RuntimeType::String => {
            ReflectValueBox::String(value.as_str().ok_or_else(wrong)?.to_string())
        }
        RuntimeType::VecU8 => {
            let text = value.as_str().ok_or_else(wrong)?;
            ReflectValueBox::Bytes(STANDARD.decode(text).map_err(|_| wrong())?)
        }
        RuntimeType::Enum(descriptor) => {
            let name = value.as_str().ok_or_else(wrong)?;
            let number = descriptor.value_by_name(name).ok_or_else(wrong)?.value();
            ReflectValueBox::Enum(descriptor.clone(), number)
        }
        RuntimeType::Message(descriptor) => {
            ReflectValueBox::Message(message(descriptor, value, path)?)
        }
    })
}

/// An RFC 3339 time as seconds since the epoch, and for a `MicroTime` its fraction too (a
/// `Time` keeps whole seconds, as kube-apiserver's does).
fn set_time(
    message: &mut dyn MessageDyn,
    value: &Value,
    micro: bool,
    path: &str,
) -> Result<(), ProtobufError> {
    let text = value
        .as_str()
        .ok_or_else(|| ProtobufError::field(path, "a time must be an RFC 3339 string"))?;
    let at: jiff::Timestamp = text.parse().map_err(|e| {
        ProtobufError::field(path, format!("{text:?} is not an RFC 3339 time: {e}"))
    })?;
    set(message, "seconds", ReflectValueBox::I64(at.as_second()));
    let nanos = at.subsec_nanosecond();
    if micro && nanos != 0 {
        set(message, "nanos", ReflectValueBox::I32(nanos));
    }
    Ok(())
}

fn set(message: &mut dyn MessageDyn, field: &str, value: ReflectValueBox) {
    if let Some(field) = message.descriptor_dyn().field_by_name(field) {
        field.set_singular_field(message, value);
    }
}
