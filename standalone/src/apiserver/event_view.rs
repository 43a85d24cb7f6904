//! `events.k8s.io/v1` Events as a view of the core `v1` Events, as kube-apiserver serves
//! them: one store, two shapes. Controllers publish through kube's `Recorder`
//! (`events.k8s.io`) while `kubectl get events` and `kubectl describe` read core events; an
//! Event written through either API is read through both.
//!
//! The field mapping is kube-apiserver's: `regarding` is `involvedObject`, `note` is
//! `message`, `reportingController` is `reportingComponent`, and the core API's `source`,
//! `firstTimestamp`, `lastTimestamp` and `count` are the `deprecated…` fields. Every other
//! field has the same name in both.

use serde_json::{Map, Value};

/// Core field name, `events.k8s.io` field name.
const RENAMED: [(&str, &str); 7] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// An `events.k8s.io` Event in the core shape it is stored in.
pub fn to_core(event: Value) -> Value {
    rename(event, false)
}

/// A stored (core) Event in the `events.k8s.io` shape.
pub fn from_core(event: Value) -> Value {
    rename(event, true)
}

fn rename(event: Value, to_view: bool) -> Value {
    let Value::Object(fields) = event else {
        return event;
    };
    let mut renamed = Map::with_capacity(fields.len());
    for (name, value) in fields {
        let to = RENAMED
            .iter()
            .map(|&(core, view)| if to_view { (core, view) } else { (view, core) })
            .find(|(from, _)| *from == name)
            .map_or(name.as_str(), |(_, to)| to);
        renamed.insert(to.to_string(), value);
    }
    Value::Object(renamed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_recorder_event_reads_as_the_core_event_kubectl_describes_and_back() {
        let published = json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "disk.1", "namespace": "ns"},
            "regarding": {"kind": "DataVolume", "name": "disk", "namespace": "ns"},
            "note": "Import into disk in progress",
            "reason": "ImportInProgress",
            "type": "Normal",
            "action": "Reconcile",
            "reportingController": "cdi-controller",
            "reportingInstance": "cdi-controller-vm",
            "eventTime": "2026-11-24T10:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-11-24T10:00:05.000000Z"},
        });
        let core = to_core(published.clone());
        assert_eq!(core["involvedObject"]["name"], "disk");
        assert_eq!(core["message"], "Import into disk in progress");
        assert_eq!(core["reportingComponent"], "cdi-controller");
        assert_eq!(core["reason"], "ImportInProgress");
        assert_eq!(core["series"]["count"], 2);
        assert!(core.get("regarding").is_none() && core.get("note").is_none());
        assert_eq!(from_core(core), published);
    }

    #[test]
    fn a_core_event_reads_with_the_deprecated_fields() {
        let core = json!({
            "involvedObject": {"name": "pod"},
            "message": "pulled",
            "source": {"component": "kubelet"},
            "firstTimestamp": "2026-11-24T10:00:00Z",
            "lastTimestamp": "2026-11-24T10:01:00Z",
            "count": 3,
        });
        let view = from_core(core.clone());
        assert_eq!(view["deprecatedSource"]["component"], "kubelet");
        assert_eq!(view["deprecatedCount"], 3);
        assert_eq!(view["deprecatedLastTimestamp"], "2026-11-24T10:01:00Z");
        assert_eq!(to_core(view), core);
    }
}
