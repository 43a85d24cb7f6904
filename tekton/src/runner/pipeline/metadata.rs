//! The PipelineRun's own labels and annotations as Tekton keeps them: the
//! `tekton.dev/pipeline` label, and the Pipeline's labels and annotations merged under the
//! run's when the Pipeline is first resolved.

use super::taskrun::labels;
use super::{Observed, PipelineRunAction, pipeline_to_fetch};

/// The annotation kubectl keeps its last applied object in; not copied from a Pipeline.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The run's labels and annotations as Tekton sets them, when they differ from the run's:
/// `tekton.dev/pipeline` when absent (the `pipelineRef` name, else the run's); on first
/// resolution (no `status.pipelineSpec` yet) the Pipeline's labels and annotations under
/// the run's and `tekton.dev/pipeline` its name (the run's for an embedded spec).
pub fn metadata_action(o: &Observed) -> Option<PipelineRunAction> {
    let run = o.pipeline_run;
    let run_name = run.metadata.name.clone().unwrap_or_default();
    let current_labels = run.metadata.labels.clone().unwrap_or_default();
    let current_annotations = run.metadata.annotations.clone().unwrap_or_default();
    let mut labels = current_labels.clone();
    let mut annotations = current_annotations.clone();
    let wanted = pipeline_to_fetch(run);
    labels
        .entry(labels::PIPELINE.into())
        .or_insert_with(|| wanted.map_or_else(|| run_name.clone(), String::from));
    let first_resolution = run
        .status
        .as_ref()
        .and_then(|s| s.pipeline_spec.as_ref())
        .is_none();
    if first_resolution {
        let fetched = o
            .pipeline
            .filter(|p| wanted.is_some() && p.metadata.name.as_deref() == wanted);
        if let Some(found) = fetched {
            for (k, v) in found.metadata.labels.iter().flatten() {
                labels.entry(k.clone()).or_insert_with(|| v.clone());
            }
            for (k, v) in found.metadata.annotations.iter().flatten() {
                if k != LAST_APPLIED {
                    annotations.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            labels.insert(labels::PIPELINE.into(), wanted.unwrap_or_default().into());
        } else if run.spec.pipeline_spec.is_some() {
            labels.insert(labels::PIPELINE.into(), run_name);
        }
    }
    (labels != current_labels || annotations != current_annotations).then_some(
        PipelineRunAction::SetMetadata {
            labels,
            annotations,
        },
    )
}
