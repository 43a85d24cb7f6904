//! `deploy/hco/`: the whole stack in one namespace, `kubevirt-hyperconverged`, as HCO installs
//! it. The operators HCO's namespace does not already hold are generated from their
//! standalone manifests (`deploy/DIR/operator.yaml`, written for a namespace of their own)
//! by moving them there: the operator and what it deploys then live beside HCO, and each
//! standalone install stays as it is. `cargo run -p ferrovirt-operators --bin hco-bundle`
//! writes them; a test keeps the committed files current.

use serde_json::Value;

use super::manifests::moved;

/// HCO's namespace, where `deploy/hco/` puts everything.
pub const HCO_NAMESPACE: &str = "kubevirt-hyperconverged";

/// The command that writes the generated files.
pub const REGENERATE: &str = "cargo run -p ferrovirt-operators --bin hco-bundle";

/// A file of `deploy/hco/` made from a standalone operator's manifests.
pub struct Generated {
    /// Its name in `deploy/hco/`.
    pub file: &'static str,
    /// The manifests it is made from, relative to `deploy/`.
    pub source: &'static str,
    /// The namespace they are written for.
    pub namespace: &'static str,
}

/// The generated files. The SSP operator is in HCO's namespace already, but its template
/// validator's webhook is served by CDI's webhook, which moves.
pub const GENERATED: &[Generated] = &[
    Generated {
        file: "11-ssp-operator.yaml",
        source: "ssp-operator/operator.yaml",
        namespace: "cdi",
    },
    Generated {
        file: "20-virt-operator.yaml",
        source: "virt-operator/operator.yaml",
        namespace: "kubevirt",
    },
    Generated {
        file: "21-cdi-operator.yaml",
        source: "cdi-operator/operator.yaml",
        namespace: "cdi",
    },
    Generated {
        file: "22-hpp-operator.yaml",
        source: "hpp-operator/operator.yaml",
        namespace: "ferrovirt",
    },
];

impl Generated {
    /// The file's text, from `source_text` (the text of [`Generated::source`]).
    pub fn render(&self, source_text: &str) -> Result<String, serde_saphyr::SerializeError> {
        let mut text = format!(
            "# Generated from deploy/{}, every object moved\n# to {HCO_NAMESPACE} as HCO installs the stack. Do not edit: change the source, then run\n#   {REGENERATE}\n",
            self.source
        );
        let documents: Vec<Value> = moved(self.source, source_text, self.namespace, HCO_NAMESPACE);
        for (i, document) in documents.iter().enumerate() {
            if i > 0 {
                text.push_str("---\n");
            }
            text.push_str(&serde_saphyr::to_string(document)?);
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_files_hold_nothing_outside_hcos_namespace() {
        for generated in GENERATED {
            let source = std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../deploy")
                    .join(generated.source),
            )
            .expect("the source manifests");
            let text = generated.render(&source).expect("renders");
            assert!(
                !text.contains(&format!("namespace: {}\n", generated.namespace)),
                "{}: {text}",
                generated.file
            );
            assert!(text.contains(&format!("namespace: {HCO_NAMESPACE}\n")));
        }
    }
}
