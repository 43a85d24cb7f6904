//! Events on the objects a controller reconciles, published through kube's `Recorder`. An
//! event that cannot be published is logged, never an error: it must not stop a reconcile.

use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder};

/// Publishes a `Normal` (or, when `warning`, a `Warning`) event with `reason` and `message`
/// on `object`, under the action `Reconcile`.
pub async fn publish<K>(recorder: &Recorder, object: &K, warning: bool, reason: &str, message: &str)
where
    K: Resource<DynamicType = ()>,
{
    let event = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_string(),
        note: Some(message.to_string()),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    if let Err(err) = recorder.publish(&event, &object.object_ref(&())).await {
        tracing::warn!(%err, reason, "cannot publish event");
    }
}
