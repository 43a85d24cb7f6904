#!/usr/bin/python3
"""Python's kubernetes client (Debian's python3-kubernetes) against the embedded API server.

Usage: list_watch.py KUBECONFIG
Lists ConfigMaps, creates one, then watches from the list's resourceVersion while patching
and deleting it; prints one line per event seen and exits non-zero on any mismatch.
"""
import sys

from kubernetes import client, config, watch


def main():
    config.load_kube_config(config_file=sys.argv[1])
    v1 = client.CoreV1Api()

    listed = v1.list_namespaced_config_map("default")
    names = [cm.metadata.name for cm in listed.items]
    assert "python-cm" not in names, names
    for name in names:
        print("LISTED", name, flush=True)
    start_rv = listed.metadata.resource_version
    assert start_rv, "a list carries a resourceVersion"

    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="python-cm", labels={"from": "python"}),
        data={"step": "created"},
    )
    created = v1.create_namespaced_config_map("default", body)
    assert created.metadata.uid, "the server fills in a uid"

    listed = v1.list_namespaced_config_map("default", label_selector="from=python")
    assert [cm.metadata.name for cm in listed.items] == ["python-cm"], listed.items

    seen = []
    w = watch.Watch()
    for event in w.stream(
        v1.list_namespaced_config_map,
        "default",
        resource_version=start_rv,
        timeout_seconds=20,
    ):
        kind, obj = event["type"], event["object"]
        seen.append((kind, obj.metadata.name, (obj.data or {}).get("step")))
        print(kind, obj.metadata.name, obj.metadata.resource_version, flush=True)
        if kind == "ADDED" and obj.metadata.name == "python-cm":
            v1.patch_namespaced_config_map(
                "python-cm", "default", {"data": {"step": "patched"}}
            )
        elif kind == "MODIFIED" and obj.metadata.name == "python-cm":
            v1.delete_namespaced_config_map("python-cm", "default")
        elif kind == "DELETED" and obj.metadata.name == "python-cm":
            w.stop()

    expected = [
        ("ADDED", "python-cm", "created"),
        ("MODIFIED", "python-cm", "patched"),
        ("DELETED", "python-cm", "patched"),
    ]
    if seen != expected:
        print("expected", expected, "saw", seen, file=sys.stderr)
        return 1
    print("OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
