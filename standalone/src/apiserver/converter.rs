//! How a resource's objects move between its served versions: its [`Strategy`], and the
//! in-process [`Converter`] a component registers for a kind whose CRD asks for a conversion
//! webhook. The conversion itself is [`super::conversion`]'s.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// Converts an object of the kind (at any served version) to the given `apiVersion`, or
/// says why it cannot.
pub type ConvertFn = dyn Fn(&Value, &str) -> Result<Value, String> + Send + Sync;

/// An in-process conversion webhook of one kind.
#[derive(Clone)]
pub struct Converter {
    pub group: String,
    pub kind: String,
    pub(super) convert: Arc<ConvertFn>,
}

impl Converter {
    pub fn new(
        group: impl Into<String>,
        kind: impl Into<String>,
        convert: impl Fn(&Value, &str) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Converter {
        Converter {
            group: group.into(),
            kind: kind.into(),
            convert: Arc::new(convert),
        }
    }
}

impl fmt::Debug for Converter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Converter({}/{})", self.group, self.kind)
    }
}

/// How a resource's objects move between its versions.
#[derive(Clone, Debug, Default)]
pub enum Strategy {
    /// Only the `apiVersion` changes (built-in kinds, and CRDs with strategy `None`).
    #[default]
    None,
    /// The CRD asks for a conversion webhook: the in-process one, once registered.
    Webhook(Option<Converter>),
}

impl Strategy {
    /// A CRD's strategy (without its converter).
    pub fn of_crd(crd: &Value) -> Strategy {
        match crd["spec"]["conversion"]["strategy"].as_str() {
            Some("Webhook") => Strategy::Webhook(None),
            _ => Strategy::None,
        }
    }
}
