//! The TaskRun and PipelineRun runner of `ferrovirt up`, in the making: the pieces that
//! must match Tekton (tektoncd/pipeline v1.15.0) to the character, written first as pure
//! functions with their tests. Names of the objects a run makes ([`names`]), variable
//! substitution ([`substitution`]) and durations as Tekton prints them in its messages
//! ([`duration`]). What the runner must do is written down in
//! `docs/notes/tekton-runner-upstream.md`.

pub mod duration;
pub mod labels;
pub mod names;
pub mod pipeline;
pub mod substitution;
pub mod taskrun;
