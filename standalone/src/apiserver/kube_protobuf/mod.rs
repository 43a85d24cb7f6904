//! `application/vnd.kubernetes.protobuf` for the built-in kinds, as kube-apiserver speaks it:
//! the four bytes `k8s\0`, then a `runtime.Unknown` whose `typeMeta` names the kind and whose
//! `raw` is the object's message.
//!
//! Objects are stored and handled as JSON; protobuf is a translation at the edge. The
//! messages' descriptors are Kubernetes' own `generated.proto` files (Kubernetes 1.33, the
//! version this server reports), compiled by build.rs; `protobuf`'s dynamic messages read and
//! write them. What is written here by hand is only what no crate knows: how the
//! Kubernetes JSON of a field differs from its message (times as RFC 3339 strings,
//! quantities, int-or-string, embedded raw JSON, and Go's rules for which empty fields a
//! client meant).

mod from_json;
mod messages;
mod to_json;

use protobuf::MessageDyn;
use protobuf::reflect::{MessageDescriptor, ReflectValueBox, ReflectValueRef};
use serde_json::Value;

pub use messages::Messages;

/// The media type of Kubernetes protobuf.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8; 4] = b"k8s\0";

#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    #[error("the protobuf body does not start with the Kubernetes prefix \"k8s\\0\"")]
    NoPrefix,
    #[error("the protobuf envelope (runtime.Unknown) does not decode: {0}")]
    Envelope(protobuf::Error),
    #[error(
        "the protobuf envelope names no kind (typeMeta.apiVersion and typeMeta.kind are required)"
    )]
    NoTypeMeta,
    #[error("the protobuf envelope has content encoding {0:?}; only unencoded bodies are read")]
    ContentEncoding(String),
    #[error(
        "this server has no protobuf message for kind {kind} in {api_version}; send it as application/json"
    )]
    UnknownKind { api_version: String, kind: String },
    #[error("the {message} in the protobuf body does not decode: {source}")]
    Message {
        message: String,
        source: protobuf::Error,
    },
    #[error("{path}: {problem}")]
    Field { path: String, problem: String },
}

impl ProtobufError {
    fn field(path: &str, problem: impl Into<String>) -> Self {
        ProtobufError::Field {
            path: path.to_string(),
            problem: problem.into(),
        }
    }
}

impl Messages {
    /// The object in a protobuf request body, as JSON with its `apiVersion` and `kind`.
    pub fn decode(&self, body: &[u8]) -> Result<Value, ProtobufError> {
        let envelope = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoPrefix)?;
        let unknown = Envelope::parse(self.envelope(), envelope)?;
        if !unknown.content_encoding.is_empty() {
            return Err(ProtobufError::ContentEncoding(unknown.content_encoding));
        }
        let Envelope {
            api_version, kind, ..
        } = &unknown;
        if api_version.is_empty() || kind.is_empty() {
            return Err(ProtobufError::NoTypeMeta);
        }
        let descriptor =
            self.find(api_version, kind)
                .ok_or_else(|| ProtobufError::UnknownKind {
                    api_version: api_version.clone(),
                    kind: kind.clone(),
                })?;
        let message = descriptor
            .parse_from_bytes(&unknown.raw)
            .map_err(|source| ProtobufError::Message {
                message: descriptor.full_name().to_string(),
                source,
            })?;
        let mut object = to_json::message(&*message, kind)?;
        if let Value::Object(fields) = &mut object {
            fields.insert("apiVersion".into(), Value::String(unknown.api_version));
            fields.insert("kind".into(), Value::String(unknown.kind));
        }
        Ok(object)
    }

    /// `object` as a protobuf body, or `None` when its kind has no message (custom
    /// resources), which are then answered in JSON as kube-apiserver does.
    pub fn encode(&self, object: &Value) -> Result<Option<Vec<u8>>, ProtobufError> {
        let field = |name| object.get(name).and_then(Value::as_str).unwrap_or("");
        let (api_version, kind) = (field("apiVersion"), field("kind"));
        let Some(descriptor) = self.find(api_version, kind) else {
            return Ok(None);
        };
        let message = from_json::message(&descriptor, object, kind)?;
        let raw = message
            .write_to_bytes_dyn()
            .map_err(|e| ProtobufError::field(kind, e.to_string()))?;
        let envelope = Envelope {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            raw,
            content_encoding: String::new(),
        };
        let mut body = MAGIC.to_vec();
        body.extend(envelope.write(self.envelope())?);
        Ok(Some(body))
    }
}

/// `runtime.Unknown`'s fields: the kind (its `typeMeta`), the object's message, and how
/// that message is encoded.
#[derive(Debug, Default, PartialEq)]
pub struct Envelope {
    pub api_version: String,
    pub kind: String,
    pub raw: Vec<u8>,
    pub content_encoding: String,
}

impl Envelope {
    fn parse(descriptor: &MessageDescriptor, bytes: &[u8]) -> Result<Self, ProtobufError> {
        let unknown = descriptor
            .parse_from_bytes(bytes)
            .map_err(ProtobufError::Envelope)?;
        let mut envelope = Envelope::default();
        if let Some(type_meta) = singular(&*unknown, "typeMeta").and_then(as_message) {
            envelope.api_version = string_field(&*type_meta, "apiVersion");
            envelope.kind = string_field(&*type_meta, "kind");
        }
        if let Some(ReflectValueRef::Bytes(raw)) = singular(&*unknown, "raw") {
            envelope.raw = raw.to_vec();
        }
        envelope.content_encoding = string_field(&*unknown, "contentEncoding");
        Ok(envelope)
    }

    fn write(self, descriptor: &MessageDescriptor) -> Result<Vec<u8>, ProtobufError> {
        let set = |message: &mut dyn MessageDyn, name: &str, value: ReflectValueBox| {
            let field = message
                .descriptor_dyn()
                .field_by_name(name)
                .ok_or_else(|| ProtobufError::field(name, "runtime.Unknown has no such field"))?;
            field.set_singular_field(message, value);
            Ok::<_, ProtobufError>(())
        };
        let mut unknown = descriptor.new_instance();
        let type_meta_field = descriptor
            .field_by_name("typeMeta")
            .ok_or_else(|| ProtobufError::field("typeMeta", "runtime.Unknown has no such field"))?;
        let type_meta = type_meta_field.mut_message(&mut *unknown);
        set(
            type_meta,
            "apiVersion",
            ReflectValueBox::String(self.api_version),
        )?;
        set(type_meta, "kind", ReflectValueBox::String(self.kind))?;
        set(&mut *unknown, "raw", ReflectValueBox::Bytes(self.raw))?;
        unknown
            .write_to_bytes_dyn()
            .map_err(|e| ProtobufError::field("runtime.Unknown", e.to_string()))
    }
}

fn singular<'a>(message: &'a dyn MessageDyn, name: &str) -> Option<ReflectValueRef<'a>> {
    message
        .descriptor_dyn()
        .field_by_name(name)?
        .get_singular(message)
}

fn as_message(value: ReflectValueRef<'_>) -> Option<protobuf::reflect::MessageRef<'_>> {
    match value {
        ReflectValueRef::Message(message) => Some(message),
        _ => None,
    }
}

fn string_field(message: &dyn MessageDyn, name: &str) -> String {
    match singular(message, name) {
        Some(ReflectValueRef::String(value)) => value.to_string(),
        _ => String::new(),
    }
}

/// Whether a client's `Accept` header prefers protobuf for a plain object: its first media
/// range is Kubernetes protobuf without `as=` (a Table or metadata-only view, which this
/// server answers in JSON).
pub fn preferred_in(accept: &str) -> bool {
    let Some(first) = accept.split(',').map(str::trim).find(|r| !r.is_empty()) else {
        return false;
    };
    let mut parts = first.split(';').map(str::trim);
    parts.next() == Some(MEDIA_TYPE) && !parts.any(|p| p.starts_with("as="))
}

/// Whether a `Content-Type` is Kubernetes protobuf.
pub fn is_media_type(content_type: &str) -> bool {
    content_type.split(';').next().map(str::trim) == Some(MEDIA_TYPE)
}

#[cfg(test)]
mod tests;
