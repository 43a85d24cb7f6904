//! When expressions: the guards of a pipeline task or step (`when_types.go`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The operators of a when expression.
pub mod operator {
    pub const IN: &str = "in";
    pub const NOT_IN: &str = "notin";
}

/// `input` is (`in`) or is not (`notin`) one of `values`; or, alpha, a CEL expression.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WhenExpression {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// `in` or `notin` ([`operator`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// A CEL expression that must be true (alpha flag `enable-cel-in-whenexpression`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<String>,
}

impl WhenExpression {
    /// Whether the expression lets its task run (its `input` and `values` already
    /// substituted); a CEL expression is not evaluated here and is taken as false.
    pub fn allows(&self) -> bool {
        let input = self.input.as_deref().unwrap_or_default();
        let listed = self.values.iter().flatten().any(|v| v == input);
        match self.operator.as_deref() {
            Some(operator::IN) => listed,
            Some(operator::NOT_IN) => !listed,
            _ => false,
        }
    }
}
