use serde_json::json;

use super::*;

/// Protobuf's wire format, written out by hand so the fixtures do not depend on the code
/// under test.
fn varint(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn bytes_field(number: u64, value: &[u8]) -> Vec<u8> {
    let mut out = varint(number << 3 | 2);
    out.extend(varint(value.len() as u64));
    out.extend_from_slice(value);
    out
}

fn varint_field(number: u64, value: u64) -> Vec<u8> {
    let mut out = varint(number << 3);
    out.extend(varint(value));
    out
}

/// `k8s\0` and a runtime.Unknown: typeMeta (1) {apiVersion (1), kind (2)}, raw (2).
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let type_meta = [
        bytes_field(1, api_version.as_bytes()),
        bytes_field(2, kind.as_bytes()),
    ]
    .concat();
    let mut body = MAGIC.to_vec();
    body.extend(bytes_field(1, &type_meta));
    body.extend(bytes_field(2, &raw));
    body
}

/// What a Go client writes for `kubectl create namespace demo`: every non-pointer field,
/// empty strings and the zero creation time included.
fn go_namespace() -> Vec<u8> {
    let meta = [
        bytes_field(1, b"demo"),
        bytes_field(2, b""),
        bytes_field(3, b""),
        bytes_field(4, b""),
        bytes_field(5, b""),
        bytes_field(6, b""),
        varint_field(7, 0),
        bytes_field(8, &[varint_field(1, 0), varint_field(2, 0)].concat()),
    ]
    .concat();
    let namespace = [
        bytes_field(1, &meta),
        bytes_field(2, &[]),
        bytes_field(3, &[]),
    ]
    .concat();
    envelope("v1", "Namespace", namespace)
}

#[test]
fn a_go_clients_namespace_reads_as_the_json_it_means() {
    let object = Messages::new().decode(&go_namespace()).unwrap();
    assert_eq!(
        object,
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "demo", "generation": 0},
            "spec": {},
            "status": {},
        })
    );
}

#[test]
fn every_special_field_survives_a_round_trip() {
    let messages = Messages::new();
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "creationTimestamp": "2024-05-06T07:08:09Z",
            "labels": {"app": "x"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {}}}],
        },
        "spec": {
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "c",
                "image": "busybox",
                "ports": [{"containerPort": 80}],
                "resources": {"limits": {"memory": "64Mi", "cpu": "500m"}},
                "readinessProbe": {"httpGet": {"port": "http", "path": "/"}},
                "livenessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 5},
                "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            }],
            "volumes": [{"name": "v", "configMap": {"name": "cm", "defaultMode": 420}}],
        },
        "status": {"phase": "Running"},
    });
    let body = messages.encode(&pod).unwrap().expect("Pod has a message");
    assert!(body.starts_with(b"k8s\0"));
    assert_eq!(messages.decode(&body).unwrap(), pod);
}

#[test]
fn secret_bytes_microtimes_inlined_sources_and_empty_storage_class() {
    let messages = Messages::new();
    for object in [
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
               "data": {"k": "aGVsbG8="}, "type": "Opaque"}),
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
               "eventTime": "2024-05-06T07:08:09.123456Z", "reason": "Bound"}),
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
               "spec": {"csi": {"driver": "d", "volumeHandle": "h"}, "capacity": {"storage": "1Gi"},
                        "claimRef": {"namespace": "ns", "name": "c"}}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
               "spec": {"storageClassName": "", "accessModes": ["ReadWriteOnce"]}}),
    ] {
        let body = messages.encode(&object).unwrap().unwrap();
        assert_eq!(messages.decode(&body).unwrap(), object);
    }
}

#[test]
fn a_list_and_a_status_have_messages() {
    let messages = Messages::new();
    let list = json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {"resourceVersion": "7"},
                      "items": [{"metadata": {"name": "a"}, "data": {"x": "y"}}]});
    let body = messages.encode(&list).unwrap().unwrap();
    assert_eq!(messages.decode(&body).unwrap(), list);
    let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 404});
    assert!(messages.encode(&status).unwrap().is_some());
}

#[test]
fn custom_resources_stay_json() {
    let dv = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": {"name": "d"}});
    assert_eq!(Messages::new().encode(&dv).unwrap(), None);
}

#[test]
fn bad_bodies_are_named() {
    let messages = Messages::new();
    let err = |body: &[u8]| messages.decode(body).unwrap_err().to_string();
    assert!(err(b"{\"kind\":\"Namespace\"}").contains("prefix"));
    assert!(err(b"k8s\0\xff\xff\xff").contains("envelope"));
    assert!(err(&envelope("v1", "Namespace", vec![0x0a, 0xff])).contains("api.core.v1.Namespace"));
    let unknown = err(&envelope("example.com/v1", "Widget", vec![]));
    assert!(
        unknown.contains("Widget") && unknown.contains("example.com/v1"),
        "{unknown}"
    );
    assert!(err(&envelope("", "", vec![])).contains("typeMeta"));
    assert!(
        messages
            .decode(&envelope("v1", "ConfigMap", vec![]))
            .is_ok()
    );
}

#[test]
fn accept_headers() {
    assert!(preferred_in("application/vnd.kubernetes.protobuf, */*"));
    assert!(preferred_in(
        "application/vnd.kubernetes.protobuf,application/json"
    ));
    assert!(!preferred_in(
        "application/json, application/vnd.kubernetes.protobuf"
    ));
    assert!(!preferred_in(
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
    ));
    assert!(!preferred_in(""));
    assert!(is_media_type("application/vnd.kubernetes.protobuf"));
    assert!(!is_media_type("application/json"));
}

#[test]
fn the_envelope_round_trips() {
    let messages = Messages::new();
    let body = envelope("v1", "ConfigMap", vec![1, 2, 3]);
    let parsed = Envelope::parse(messages.envelope(), &body[4..]).unwrap();
    assert_eq!(
        parsed,
        Envelope {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            raw: vec![1, 2, 3],
            content_encoding: String::new(),
        }
    );
    assert_eq!(parsed.write(messages.envelope()).unwrap(), body[4..]);
}
