//! Conformance: the groups of kubernetes-csi's csi-sanity (identity; controller volumes,
//! capacity, validation, snapshots, expansion; node stage/publish/stats/expand), in Rust, against
//! the real driver over its unix socket, with real mounts and loop devices (run as root; node
//! tests are skipped with the reason where mounts are not permitted).

use crate::{common, require_mounts};

use std::os::unix::fs::MetadataExt;

use common::*;
use ferrovirt_csi_driver::proto::*;
use tonic::Code;

// ---------------------------------------------------------------- identity

#[tokio::test]
async fn identity_info_capabilities_and_probe() {
    let mut d = TestDriver::start().await;
    let info = d
        .identity
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "kubevirt.io.hostpath-provisioner");
    assert!(!info.vendor_version.is_empty());
    let caps = d
        .identity
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities;
    let services: Vec<i32> = caps
        .iter()
        .filter_map(|c| match &c.r#type {
            Some(plugin_capability::Type::Service(s)) => Some(s.r#type),
            _ => None,
        })
        .collect();
    assert!(services.contains(&(plugin_capability::service::Type::ControllerService as i32)));
    assert!(
        services
            .contains(&(plugin_capability::service::Type::VolumeAccessibilityConstraints as i32))
    );
    assert!(caps.iter().any(|c| matches!(
        &c.r#type,
        Some(plugin_capability::Type::VolumeExpansion(e))
            if e.r#type == plugin_capability::volume_expansion::Type::Online as i32
    )));
    let probe = d
        .identity
        .probe(ProbeRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(probe.ready, Some(true));
}

/// Python's grpcio names the socket as the HTTP/2 authority (grpc/grpc#38142), in both of
/// the target forms it accepts; the driver answers it as it answers Go's clients.
#[tokio::test]
async fn python_grpcio_is_served_despite_its_socket_authority() {
    let d = TestDriver::start().await;
    let socket = d.path("csi.sock").display().to_string();
    let script = r#"
import sys, grpc
for target in ("unix://" + sys.argv[1], "unix:" + sys.argv[1]):
    channel = grpc.insecure_channel(target)
    call = channel.unary_unary("/csi.v1.Identity/GetPluginInfo")
    reply = call(b"", timeout=10)
    assert b"kubevirt.io.hostpath-provisioner" in reply, reply
    channel.close()
print("ok")
"#;
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .args(["-c", script, &socket])
            .output()
            .expect("python3 runs (scripts/test installs grpcio)")
    })
    .await
    .unwrap();
    assert!(
        out.status.success() && out.stdout.starts_with(b"ok"),
        "grpcio's call failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------- controller

#[tokio::test]
async fn controller_capabilities() {
    use controller_service_capability::rpc::Type as Rpc;
    let mut d = TestDriver::start().await;
    let caps: Vec<i32> = d
        .controller
        .controller_get_capabilities(ControllerGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities
        .into_iter()
        .filter_map(|c| {
            c.r#type
                .map(|controller_service_capability::Type::Rpc(rpc)| rpc.r#type)
        })
        .collect();
    for rpc in [
        Rpc::CreateDeleteVolume,
        Rpc::GetCapacity,
        Rpc::ListVolumes,
        Rpc::GetVolume,
        Rpc::CreateDeleteSnapshot,
        Rpc::ListSnapshots,
        Rpc::GetSnapshot,
        Rpc::CloneVolume,
        Rpc::ExpandVolume,
        Rpc::VolumeCondition,
        Rpc::SingleNodeMultiWriter,
    ] {
        assert!(caps.contains(&(rpc as i32)), "missing {rpc:?}");
    }
    assert!(!caps.contains(&(Rpc::PublishUnpublishVolume as i32)));
    let publish = d
        .controller
        .controller_publish_volume(ControllerPublishVolumeRequest::default())
        .await;
    assert_eq!(code(publish), Code::Unimplemented);
}

#[tokio::test]
async fn create_volume_rejects_bad_arguments() {
    let mut d = TestDriver::start().await;
    let mut no_name = create_request("", MIB, mount_cap());
    assert_eq!(
        code(d.controller.create_volume(no_name.clone()).await),
        Code::InvalidArgument
    );
    no_name.name = "pvc-no-caps".into();
    no_name.volume_capabilities.clear();
    assert_eq!(
        code(d.controller.create_volume(no_name).await),
        Code::InvalidArgument
    );
    let mut no_mode = create_request("pvc-no-mode", MIB, mount_cap());
    no_mode.volume_capabilities[0].access_mode = None;
    assert_eq!(
        code(d.controller.create_volume(no_mode).await),
        Code::InvalidArgument
    );
    let mut no_type = create_request("pvc-no-type", MIB, mount_cap());
    no_type.volume_capabilities[0].access_type = None;
    assert_eq!(
        code(d.controller.create_volume(no_type).await),
        Code::InvalidArgument
    );
    let mut mixed = create_request("pvc-mixed", MIB, mount_cap());
    mixed.volume_capabilities.push(block_cap());
    assert_eq!(
        code(d.controller.create_volume(mixed).await),
        Code::InvalidArgument
    );
    let mut inverted = create_request("pvc-inverted", 4 * MIB, mount_cap());
    inverted.capacity_range.as_mut().unwrap().limit_bytes = MIB;
    assert_eq!(
        code(d.controller.create_volume(inverted).await),
        Code::InvalidArgument
    );
    let negative = create_request("pvc-negative", -1, mount_cap());
    assert_eq!(
        code(d.controller.create_volume(negative).await),
        Code::InvalidArgument
    );
    let multi = create_request(
        "pvc-multi",
        MIB,
        cap_with(
            volume_capability::AccessType::Mount(Default::default()),
            volume_capability::access_mode::Mode::MultiNodeMultiWriter,
        ),
    );
    assert_eq!(
        code(d.controller.create_volume(multi).await),
        Code::InvalidArgument
    );
    let mut bad_pool = create_request("pvc-bad-pool", MIB, mount_cap());
    bad_pool
        .parameters
        .insert("storagePool".into(), "nonexistent".into());
    assert_eq!(
        code(d.controller.create_volume(bad_pool).await),
        Code::InvalidArgument
    );
    // Nothing was created by the failed calls.
    let listed = d
        .controller
        .list_volumes(ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(listed.entries.is_empty());
}

#[tokio::test]
async fn create_volume_is_idempotent_by_name() {
    let mut d = TestDriver::start().await;
    let req = create_request("pvc-idem", 10 * MIB, mount_cap());
    let first = d
        .controller
        .create_volume(req.clone())
        .await
        .unwrap()
        .into_inner();
    let second = d.controller.create_volume(req).await.unwrap().into_inner();
    assert_eq!(first, second);
    let volume = first.volume.unwrap();
    assert!(volume.capacity_bytes >= 10 * MIB);
    assert_eq!(
        volume.accessible_topology[0].segments["topology.hostpath.csi/node"],
        NODE_ID
    );
    let different = create_request("pvc-idem", 20 * MIB, mount_cap());
    assert_eq!(
        code(d.controller.create_volume(different).await),
        Code::AlreadyExists
    );
    // The second pool, picked by the StorageClass parameter.
    let mut other_pool = create_request("pvc-second", MIB, mount_cap());
    other_pool
        .parameters
        .insert("storagePool".into(), "second".into());
    let created = d
        .controller
        .create_volume(other_pool)
        .await
        .unwrap()
        .into_inner();
    let id = created.volume.unwrap().volume_id;
    assert!(d.path("pool2/csi").join(&id).join("volume.img").exists());
}

#[tokio::test]
async fn create_volume_beyond_capacity_or_elsewhere_is_resource_exhausted() {
    let mut d = TestDriver::start().await;
    let capacity = d
        .controller
        .get_capacity(GetCapacityRequest::default())
        .await
        .unwrap()
        .into_inner()
        .available_capacity;
    assert!(capacity > 0);
    let too_big = create_request("pvc-too-big", capacity + (1 << 40), mount_cap());
    assert_eq!(
        code(d.controller.create_volume(too_big).await),
        Code::ResourceExhausted
    );
    let mut elsewhere = create_request("pvc-elsewhere", MIB, mount_cap());
    elsewhere.accessibility_requirements = Some(TopologyRequirement {
        requisite: vec![Topology {
            segments: [("topology.hostpath.csi/node".into(), "node-b".into())].into(),
        }],
        preferred: vec![],
    });
    assert_eq!(
        code(d.controller.create_volume(elsewhere).await),
        Code::ResourceExhausted
    );
}

#[tokio::test]
async fn get_capacity_accounts_for_created_volumes() {
    // A pool of its own size, which neither the machine's free disk nor other tests change.
    let fs = ferrovirt_tests::tmpfs::Tmpfs::new("csi-capacity", 8 << 30);
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut d = TestDriver::start_with_pool(dir, fs.path().join("pool")).await;
    let capacity = |resp: GetCapacityResponse| {
        // The largest volume fits in what the pool can give, with its filesystem's metadata.
        let largest = resp.maximum_volume_size.unwrap_or(0) as u64;
        let image = ferrovirt_hostpath::filesystem::image_len(largest);
        assert!(largest > 0 && image <= resp.available_capacity as u64);
        resp.available_capacity
    };
    let before = capacity(
        d.controller
            .get_capacity(GetCapacityRequest::default())
            .await
            .unwrap()
            .into_inner(),
    );
    let size = 3 << 30;
    d.create("pvc-cap", size, mount_cap()).await;
    let after = capacity(
        d.controller
            .get_capacity(GetCapacityRequest::default())
            .await
            .unwrap()
            .into_inner(),
    );
    // Promised, not yet written: the whole image, longer than the size by its filesystem's
    // metadata (a page or two of the volume's directory besides).
    let image = ferrovirt_hostpath::filesystem::image_len(size as u64) as i64;
    let drop = before - after;
    assert!(drop >= image && drop < image + MIB, "{before} -> {after}");
    let other_node = d
        .controller
        .get_capacity(GetCapacityRequest {
            accessible_topology: Some(Topology {
                segments: [("topology.hostpath.csi/node".into(), "node-b".into())].into(),
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(other_node.available_capacity, 0);
}

#[tokio::test]
async fn delete_volume_is_idempotent() {
    let mut d = TestDriver::start().await;
    assert_eq!(
        code(
            d.controller
                .delete_volume(DeleteVolumeRequest::default())
                .await
        ),
        Code::InvalidArgument
    );
    let id = d.create("pvc-del", MIB, mount_cap()).await;
    for _ in 0..2 {
        d.controller
            .delete_volume(DeleteVolumeRequest {
                volume_id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    assert!(!d.path("pool/csi").join(&id).exists());
    d.controller
        .delete_volume(DeleteVolumeRequest {
            volume_id: "never-existed".into(),
            ..Default::default()
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn list_volumes_paginates() {
    let mut d = TestDriver::start().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(d.create(&format!("pvc-list-{i}"), MIB, mount_cap()).await);
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = d
            .controller
            .list_volumes(ListVolumesRequest {
                max_entries: 2,
                starting_token: token.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.entries.len() <= 2);
        for entry in page.entries {
            let status = entry.status.unwrap();
            assert!(!status.volume_condition.unwrap().abnormal);
            seen.push(entry.volume.unwrap().volume_id);
        }
        if page.next_token.is_empty() {
            break;
        }
        token = page.next_token;
    }
    seen.sort();
    ids.sort();
    assert_eq!(seen, ids);
    // As csi-sanity does: delete the last volume of a page and add one between pages; the
    // token still resumes where the page ended.
    let first = d
        .controller
        .list_volumes(ListVolumesRequest {
            max_entries: 2,
            starting_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let last = first.entries[1].volume.as_ref().unwrap().volume_id.clone();
    d.controller
        .delete_volume(DeleteVolumeRequest {
            volume_id: last,
            ..Default::default()
        })
        .await
        .unwrap();
    let added = d.create("pvc-list-new", MIB, mount_cap()).await;
    let rest = d
        .controller
        .list_volumes(ListVolumesRequest {
            max_entries: 0,
            starting_token: first.next_token,
        })
        .await
        .unwrap()
        .into_inner();
    let mut rest: Vec<String> = rest
        .entries
        .into_iter()
        .map(|e| e.volume.unwrap().volume_id)
        .collect();
    rest.sort();
    let mut expected: Vec<String> = ids[2..].to_vec();
    expected.push(added);
    expected.sort();
    assert_eq!(rest, expected);
    let bad = d
        .controller
        .list_volumes(ListVolumesRequest {
            max_entries: 0,
            starting_token: "not-a-token".into(),
        })
        .await;
    assert_eq!(code(bad), Code::Aborted);
    let negative = d
        .controller
        .list_volumes(ListVolumesRequest {
            max_entries: -1,
            starting_token: String::new(),
        })
        .await;
    assert_eq!(code(negative), Code::InvalidArgument);
}

#[tokio::test]
async fn get_volume_and_condition() {
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-get", 2 * MIB, mount_cap()).await;
    let got = d
        .controller
        .controller_get_volume(ControllerGetVolumeRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.volume.unwrap().capacity_bytes, 2 * MIB);
    assert!(!got.status.unwrap().volume_condition.unwrap().abnormal);
    // The image vanishing behind the driver's back is reported, not hidden.
    std::fs::remove_file(d.path("pool/csi").join(&id).join("volume.img")).unwrap();
    let got = d
        .controller
        .controller_get_volume(ControllerGetVolumeRequest { volume_id: id })
        .await
        .unwrap()
        .into_inner();
    assert!(got.status.unwrap().volume_condition.unwrap().abnormal);
    let missing = d
        .controller
        .controller_get_volume(ControllerGetVolumeRequest {
            volume_id: "missing".into(),
        })
        .await;
    assert_eq!(code(missing), Code::NotFound);
    let empty = d
        .controller
        .controller_get_volume(ControllerGetVolumeRequest::default())
        .await;
    assert_eq!(code(empty), Code::InvalidArgument);
}

#[tokio::test]
async fn validate_volume_capabilities() {
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-validate", MIB, mount_cap()).await;
    let ok = d
        .controller
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id: id.clone(),
            volume_capabilities: vec![mount_cap()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok.confirmed.is_some());
    let multi = d
        .controller
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id: id.clone(),
            volume_capabilities: vec![cap_with(
                volume_capability::AccessType::Mount(Default::default()),
                volume_capability::access_mode::Mode::MultiNodeReaderOnly,
            )],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(multi.confirmed.is_none());
    assert!(!multi.message.is_empty());
    let block = d
        .controller
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id: id.clone(),
            volume_capabilities: vec![block_cap()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(block.confirmed.is_none());
    let no_caps = d
        .controller
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id: id,
            ..Default::default()
        })
        .await;
    assert_eq!(code(no_caps), Code::InvalidArgument);
    let missing = d
        .controller
        .validate_volume_capabilities(ValidateVolumeCapabilitiesRequest {
            volume_id: "missing".into(),
            volume_capabilities: vec![mount_cap()],
            ..Default::default()
        })
        .await;
    assert_eq!(code(missing), Code::NotFound);
}

#[tokio::test]
async fn snapshots_create_list_get_delete() {
    let mut d = TestDriver::start().await;
    let vol_a = d.create("pvc-snap-a", 4 * MIB, mount_cap()).await;
    let vol_b = d.create("pvc-snap-b", 4 * MIB, mount_cap()).await;
    let snap_req = |name: &str, source: &str| CreateSnapshotRequest {
        name: name.into(),
        source_volume_id: source.into(),
        ..Default::default()
    };
    assert_eq!(
        code(d.controller.create_snapshot(snap_req("", &vol_a)).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(d.controller.create_snapshot(snap_req("snap-x", "")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            d.controller
                .create_snapshot(snap_req("snap-x", "missing"))
                .await
        ),
        Code::NotFound
    );
    let first = d
        .controller
        .create_snapshot(snap_req("snap-1", &vol_a))
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert!(first.ready_to_use);
    assert_eq!(first.source_volume_id, vol_a);
    assert_eq!(first.size_bytes, 4 * MIB);
    assert!(first.creation_time.is_some());
    let again = d
        .controller
        .create_snapshot(snap_req("snap-1", &vol_a))
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_eq!(again, first);
    assert_eq!(
        code(
            d.controller
                .create_snapshot(snap_req("snap-1", &vol_b))
                .await
        ),
        Code::AlreadyExists
    );
    d.controller
        .create_snapshot(snap_req("snap-2", &vol_b))
        .await
        .unwrap();
    let all = d
        .controller
        .list_snapshots(ListSnapshotsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.entries.len(), 2);
    let by_source = d
        .controller
        .list_snapshots(ListSnapshotsRequest {
            source_volume_id: vol_b.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(by_source.entries.len(), 1);
    assert_eq!(
        by_source.entries[0]
            .snapshot
            .as_ref()
            .unwrap()
            .source_volume_id,
        vol_b
    );
    let by_id = d
        .controller
        .list_snapshots(ListSnapshotsRequest {
            snapshot_id: first.snapshot_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(by_id.entries.len(), 1);
    let unknown = d
        .controller
        .list_snapshots(ListSnapshotsRequest {
            snapshot_id: "unknown".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(unknown.entries.is_empty());
    let paged = d
        .controller
        .list_snapshots(ListSnapshotsRequest {
            max_entries: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(paged.entries.len(), 1);
    assert!(!paged.next_token.is_empty());
    let got = d
        .controller
        .get_snapshot(GetSnapshotRequest {
            snapshot_id: first.snapshot_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.snapshot.unwrap(), first);
    assert_eq!(
        code(
            d.controller
                .get_snapshot(GetSnapshotRequest {
                    snapshot_id: "missing".into(),
                    ..Default::default()
                })
                .await
        ),
        Code::NotFound
    );
    // Restoring from a missing snapshot or cloning a missing volume: NotFound.
    let mut from_missing = create_request("pvc-from-missing", 4 * MIB, mount_cap());
    from_missing.volume_content_source = Some(VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: "missing".into(),
            },
        )),
    });
    assert_eq!(
        code(d.controller.create_volume(from_missing).await),
        Code::NotFound
    );
    let mut clone_missing = create_request("pvc-clone-missing", 4 * MIB, mount_cap());
    clone_missing.volume_content_source = Some(VolumeContentSource {
        r#type: Some(volume_content_source::Type::Volume(
            volume_content_source::VolumeSource {
                volume_id: "missing".into(),
            },
        )),
    });
    assert_eq!(
        code(d.controller.create_volume(clone_missing).await),
        Code::NotFound
    );
    // A restore smaller than the snapshot cannot be: OutOfRange.
    let mut too_small = create_request("pvc-too-small", MIB, mount_cap());
    too_small.capacity_range.as_mut().unwrap().limit_bytes = MIB;
    too_small.volume_content_source = Some(VolumeContentSource {
        r#type: Some(volume_content_source::Type::Snapshot(
            volume_content_source::SnapshotSource {
                snapshot_id: first.snapshot_id.clone(),
            },
        )),
    });
    assert_eq!(
        code(d.controller.create_volume(too_small).await),
        Code::OutOfRange
    );
    for _ in 0..2 {
        d.controller
            .delete_snapshot(DeleteSnapshotRequest {
                snapshot_id: first.snapshot_id.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    assert_eq!(
        code(
            d.controller
                .delete_snapshot(DeleteSnapshotRequest::default())
                .await
        ),
        Code::InvalidArgument
    );
    let left = d
        .controller
        .list_snapshots(ListSnapshotsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(left.entries.len(), 1);
}

#[tokio::test]
async fn controller_expand_volume() {
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-expand", 4 * MIB, mount_cap()).await;
    let expand = |id: &str, bytes: i64| ControllerExpandVolumeRequest {
        volume_id: id.into(),
        capacity_range: Some(CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        ..Default::default()
    };
    let resp = d
        .controller
        .controller_expand_volume(expand(&id, 12 * MIB))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.capacity_bytes, 12 * MIB);
    assert!(resp.node_expansion_required);
    let image = d.path("pool/csi").join(&id).join("volume.img");
    assert_eq!(
        std::fs::metadata(&image).unwrap().len(),
        ferrovirt_hostpath::filesystem::image_len(12 << 20)
    );
    // Shrinking is not done: the current size is returned.
    let smaller = d
        .controller
        .controller_expand_volume(expand(&id, 2 * MIB))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(smaller.capacity_bytes, 12 * MIB);
    assert_eq!(
        code(
            d.controller
                .controller_expand_volume(expand("missing", MIB))
                .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code(d.controller.controller_expand_volume(expand("", MIB)).await),
        Code::InvalidArgument
    );
    let no_range = ControllerExpandVolumeRequest {
        volume_id: id.clone(),
        ..Default::default()
    };
    assert_eq!(
        code(d.controller.controller_expand_volume(no_range).await),
        Code::InvalidArgument
    );
    let huge = expand(&id, i64::MAX / 2);
    assert_eq!(
        code(d.controller.controller_expand_volume(huge).await),
        Code::ResourceExhausted
    );
}

// ---------------------------------------------------------------- node

#[tokio::test]
async fn node_capabilities_and_info() {
    use node_service_capability::rpc::Type as Rpc;
    let mut d = TestDriver::start().await;
    let caps: Vec<i32> = d
        .node
        .node_get_capabilities(NodeGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities
        .into_iter()
        .filter_map(|c| {
            c.r#type
                .map(|node_service_capability::Type::Rpc(rpc)| rpc.r#type)
        })
        .collect();
    for rpc in [
        Rpc::StageUnstageVolume,
        Rpc::GetVolumeStats,
        Rpc::ExpandVolume,
        Rpc::VolumeCondition,
        Rpc::SingleNodeMultiWriter,
    ] {
        assert!(caps.contains(&(rpc as i32)), "missing {rpc:?}");
    }
    let info = d
        .node
        .node_get_info(NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.node_id, NODE_ID);
    assert_eq!(
        info.accessible_topology.unwrap().segments["topology.hostpath.csi/node"],
        NODE_ID
    );
}

#[tokio::test]
async fn node_calls_reject_bad_arguments() {
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-node-args", 8 * MIB, mount_cap()).await;
    let staging = d.path("staging/x").display().to_string();
    let target = d.path("target/x").display().to_string();
    let stage =
        |volume_id: &str, path: &str, cap: Option<VolumeCapability>| NodeStageVolumeRequest {
            volume_id: volume_id.into(),
            staging_target_path: path.into(),
            volume_capability: cap,
            ..Default::default()
        };
    assert_eq!(
        code(
            d.node
                .node_stage_volume(stage("", &staging, Some(mount_cap())))
                .await
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            d.node
                .node_stage_volume(stage(&id, "", Some(mount_cap())))
                .await
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        code(d.node.node_stage_volume(stage(&id, &staging, None)).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            d.node
                .node_stage_volume(stage("missing", &staging, Some(mount_cap())))
                .await
        ),
        Code::NotFound
    );
    // A filesystem volume cannot be staged as a block device.
    assert_eq!(
        code(
            d.node
                .node_stage_volume(stage(&id, &staging, Some(block_cap())))
                .await
        ),
        Code::InvalidArgument
    );
    let publish =
        |volume_id: &str, target: &str, cap: Option<VolumeCapability>| NodePublishVolumeRequest {
            volume_id: volume_id.into(),
            staging_target_path: staging.clone(),
            target_path: target.into(),
            volume_capability: cap,
            ..Default::default()
        };
    assert_eq!(
        code(
            d.node
                .node_publish_volume(publish("", &target, Some(mount_cap())))
                .await
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            d.node
                .node_publish_volume(publish(&id, "", Some(mount_cap())))
                .await
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            d.node
                .node_publish_volume(publish(&id, &target, None))
                .await
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            d.node
                .node_publish_volume(publish("missing", &target, Some(mount_cap())))
                .await
        ),
        Code::NotFound
    );
    // Publishing before staging is a precondition failure.
    assert_eq!(
        code(
            d.node
                .node_publish_volume(publish(&id, &target, Some(mount_cap())))
                .await
        ),
        Code::FailedPrecondition
    );
    let unpublish = |volume_id: &str, target: &str| NodeUnpublishVolumeRequest {
        volume_id: volume_id.into(),
        target_path: target.into(),
    };
    assert_eq!(
        code(d.node.node_unpublish_volume(unpublish("", &target)).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(d.node.node_unpublish_volume(unpublish(&id, "")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            d.node
                .node_unpublish_volume(unpublish("missing", &target))
                .await
        ),
        Code::NotFound
    );
    let unstage = |volume_id: &str, path: &str| NodeUnstageVolumeRequest {
        volume_id: volume_id.into(),
        staging_target_path: path.into(),
    };
    assert_eq!(
        code(d.node.node_unstage_volume(unstage("", &staging)).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(d.node.node_unstage_volume(unstage(&id, "")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            d.node
                .node_unstage_volume(unstage("missing", &staging))
                .await
        ),
        Code::NotFound
    );
    let stats = |volume_id: &str, path: &str| NodeGetVolumeStatsRequest {
        volume_id: volume_id.into(),
        volume_path: path.into(),
        ..Default::default()
    };
    assert_eq!(
        code(d.node.node_get_volume_stats(stats("", &target)).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(d.node.node_get_volume_stats(stats(&id, "")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            d.node
                .node_get_volume_stats(stats("missing", &target))
                .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code(
            d.node
                .node_get_volume_stats(stats(&id, "/nonexistent/path"))
                .await
        ),
        Code::NotFound
    );
    let expand = |volume_id: &str, path: &str| NodeExpandVolumeRequest {
        volume_id: volume_id.into(),
        volume_path: path.into(),
        ..Default::default()
    };
    assert_eq!(
        code(d.node.node_expand_volume(expand("", &target)).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(d.node.node_expand_volume(expand(&id, "")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            d.node
                .node_expand_volume(expand("missing", d.dir.path().to_str().unwrap()))
                .await
        ),
        Code::NotFound
    );
}

fn mount_of(path: &std::path::Path) -> Option<ferrovirt_hostpath::mount::MountEntry> {
    ferrovirt_hostpath::mount::mount_at(path).unwrap()
}

#[tokio::test]
async fn node_stage_publish_unpublish_unstage() {
    require_mounts!();
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-node", 32 * MIB, mount_cap()).await;
    let target = d.stage_and_publish(&id, mount_cap(), false).await;
    let staging = d.path("staging").join(&id);
    // Staged: an ext4 mount of a loop device; published: a bind mount of it.
    let staged = mount_of(&staging).expect("staging path is mounted");
    assert!(staged.source.starts_with("/dev/loop"), "{staged:?}");
    assert!(mount_of(&target).is_some());
    std::fs::write(target.join("hello.txt"), b"written through the target").unwrap();
    assert_eq!(
        std::fs::read(staging.join("hello.txt")).unwrap(),
        b"written through the target"
    );
    // Publishing again at the same target with the same options is idempotent.
    d.node
        .node_publish_volume(NodePublishVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: staging.display().to_string(),
            target_path: target.display().to_string(),
            volume_capability: Some(mount_cap()),
            ..Default::default()
        })
        .await
        .unwrap();
    // Staging again at the same path is idempotent too.
    d.node
        .node_stage_volume(NodeStageVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: staging.display().to_string(),
            volume_capability: Some(mount_cap()),
            ..Default::default()
        })
        .await
        .unwrap();
    // The same target read-only is incompatible with the read-write publish: AlreadyExists.
    let conflicting = d
        .node
        .node_publish_volume(NodePublishVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: staging.display().to_string(),
            target_path: target.display().to_string(),
            volume_capability: Some(mount_cap()),
            readonly: true,
            ..Default::default()
        })
        .await;
    assert_eq!(code(conflicting), Code::AlreadyExists);
    // A second, read-only publish: writes fail with EROFS, reads see the data.
    let ro_target = d.path("target-ro");
    d.node
        .node_publish_volume(NodePublishVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: staging.display().to_string(),
            target_path: ro_target.display().to_string(),
            volume_capability: Some(mount_cap()),
            readonly: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(mount_of(&ro_target).unwrap().read_only);
    assert_eq!(
        std::fs::read(ro_target.join("hello.txt")).unwrap(),
        b"written through the target"
    );
    let err = std::fs::write(ro_target.join("nope.txt"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc_erofs()));
    // Unstaging while published is refused.
    let early = d
        .node
        .node_unstage_volume(NodeUnstageVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: staging.display().to_string(),
        })
        .await;
    assert_eq!(code(early), Code::FailedPrecondition);
    for t in [&ro_target, &target] {
        for _ in 0..2 {
            d.node
                .node_unpublish_volume(NodeUnpublishVolumeRequest {
                    volume_id: id.clone(),
                    target_path: t.display().to_string(),
                })
                .await
                .unwrap();
        }
        assert!(!t.exists(), "unpublish removes the target path");
    }
    for _ in 0..2 {
        d.node
            .node_unstage_volume(NodeUnstageVolumeRequest {
                volume_id: id.clone(),
                staging_target_path: staging.display().to_string(),
            })
            .await
            .unwrap();
    }
    assert!(mount_of(&staging).is_none());
    let image = d.path("pool/csi").join(&id).join("volume.img");
    assert!(
        ferrovirt_hostpath::loopdev::find(&image)
            .unwrap()
            .is_empty()
    );
    // The data is in the image: staging again shows it.
    let target = d.stage_and_publish(&id, mount_cap(), false).await;
    assert_eq!(
        std::fs::read(target.join("hello.txt")).unwrap(),
        b"written through the target"
    );
    d.unpublish_and_unstage(&id).await;
    d.controller
        .delete_volume(DeleteVolumeRequest {
            volume_id: id,
            ..Default::default()
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn single_node_single_writer_is_published_at_one_target_only() {
    require_mounts!();
    use volume_capability::access_mode::Mode;
    let mut d = TestDriver::start().await;
    let single = |access| cap_with(access, Mode::SingleNodeSingleWriter);
    let mount = || volume_capability::AccessType::Mount(Default::default());
    let block = || volume_capability::AccessType::Block(volume_capability::BlockVolume {});
    for (name, cap) in [("ssw-fs", single(mount())), ("ssw-block", single(block()))] {
        let id = d.create(name, 16 * MIB, cap.clone()).await;
        d.stage_and_publish(&id, cap.clone(), false).await;
        let second = d.path("second").join(&id);
        let staging = d.path("staging").join(&id).display().to_string();
        let publish = |target: &std::path::Path, cap: VolumeCapability| NodePublishVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: staging.clone(),
            target_path: target.display().to_string(),
            volume_capability: Some(cap),
            ..Default::default()
        };
        let refused = d
            .node
            .node_publish_volume(publish(&second, cap.clone()))
            .await;
        assert_eq!(code(refused), Code::FailedPrecondition, "{name}");
        assert!(!second.exists(), "{name}: the refused target is left alone");
        // The same target again is still idempotent.
        let target = d.path("target").join(&id);
        d.node
            .node_publish_volume(publish(&target, cap.clone()))
            .await
            .expect("the same target again");
        d.unpublish_and_unstage(&id).await;
    }
}

#[tokio::test]
async fn a_failed_publish_leaves_no_mount_loop_device_or_target() {
    require_mounts!();
    let mut d = TestDriver::start().await;
    let id = d.create("fails-block", 16 * MIB, block_cap()).await;
    d.stage_and_publish(&id, block_cap(), false).await;
    let image = d.path("pool/csi").join(&id).join("volume.img");
    let devices = ferrovirt_hostpath::loopdev::find(&image).unwrap().len();
    // A target in a read-only directory: the read-only publication attaches a loop device of
    // its own, then cannot make the target file, and must give the device back.
    let locked = d.path("locked");
    std::fs::create_dir_all(&locked).unwrap();
    let bind = |args: &[&str]| {
        let status = std::process::Command::new("mount")
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "mount {args:?}");
    };
    let locked_str = locked.display().to_string();
    bind(&["--bind", &locked_str, &locked_str]);
    bind(&["-o", "remount,bind,ro", &locked_str]);
    let target = locked.join("disk");
    let failed = d
        .node
        .node_publish_volume(NodePublishVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: d.path("staging").join(&id).display().to_string(),
            target_path: target.display().to_string(),
            volume_capability: Some(block_cap()),
            readonly: true,
            ..Default::default()
        })
        .await;
    assert_eq!(code(failed), Code::Internal);
    assert!(mount_of(&target).is_none());
    assert!(!target.exists());
    assert_eq!(
        ferrovirt_hostpath::loopdev::find(&image).unwrap().len(),
        devices,
        "the failed publication's loop device is detached"
    );
    let status = std::process::Command::new("umount")
        .arg(&locked)
        .status()
        .unwrap();
    assert!(status.success());
    d.unpublish_and_unstage(&id).await;
}

fn libc_erofs() -> i32 {
    rustix::io::Errno::ROFS.raw_os_error()
}

#[tokio::test]
async fn node_volume_stats() {
    require_mounts!();
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-stats", 64 * MIB, mount_cap()).await;
    let target = d.stage_and_publish(&id, mount_cap(), false).await;
    let stats = |d: &mut TestDriver| {
        let req = NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: target.display().to_string(),
            ..Default::default()
        };
        let mut node = d.node.clone();
        async move { node.node_get_volume_stats(req).await.unwrap().into_inner() }
    };
    let before = stats(&mut d).await;
    let bytes = before
        .usage
        .iter()
        .find(|u| u.unit == volume_usage::Unit::Bytes as i32)
        .copied()
        .unwrap();
    assert!(
        bytes.total >= 64 * MIB
            && bytes.total as u64 <= ferrovirt_hostpath::filesystem::image_len(64 << 20),
        "{bytes:?}"
    );
    assert!(bytes.available > 0 && bytes.used >= 0);
    assert!(
        before
            .usage
            .iter()
            .any(|u| u.unit == volume_usage::Unit::Inodes as i32 && u.total > 0)
    );
    assert!(!before.volume_condition.unwrap().abnormal);
    std::fs::write(target.join("ten-mib"), vec![7u8; 10 << 20]).unwrap();
    rustix::fs::syncfs(std::fs::File::open(&target).unwrap()).unwrap();
    let after = stats(&mut d).await;
    let used_after = after
        .usage
        .iter()
        .find(|u| u.unit == volume_usage::Unit::Bytes as i32)
        .unwrap()
        .used;
    assert!(
        used_after - bytes.used >= 9 * MIB,
        "{} -> {used_after}",
        bytes.used
    );
    d.unpublish_and_unstage(&id).await;
}

fn fs_total(path: &std::path::Path) -> u64 {
    let vfs = rustix::fs::statvfs(path).unwrap();
    vfs.f_blocks * vfs.f_frsize
}

async fn expand(d: &mut TestDriver, id: &str, bytes: i64, volume_path: &std::path::Path) -> i64 {
    let resp = d
        .controller
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: id.into(),
            capacity_range: Some(CapacityRange {
                required_bytes: bytes,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(resp.node_expansion_required);
    d.node
        .node_expand_volume(NodeExpandVolumeRequest {
            volume_id: id.into(),
            volume_path: volume_path.display().to_string(),
            capacity_range: Some(CapacityRange {
                required_bytes: bytes,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .capacity_bytes
}

#[tokio::test]
async fn node_expand_volume_offline() {
    require_mounts!();
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-offline-expand", 32 * MIB, mount_cap()).await;
    let target = d.stage_and_publish(&id, mount_cap(), false).await;
    let before = fs_total(&target);
    std::fs::write(target.join("kept"), vec![3u8; 5 << 20]).unwrap();
    d.unpublish_and_unstage(&id).await;
    let staging_parent = d.path("staging");
    assert_eq!(
        expand(&mut d, &id, 96 * MIB, &staging_parent).await,
        96 * MIB
    );
    // The filesystem is grown offline at the next stage.
    let target = d.stage_and_publish(&id, mount_cap(), false).await;
    let after = fs_total(&target);
    assert!(after > before + 50 * (MIB as u64), "{before} -> {after}");
    assert_eq!(
        std::fs::read(target.join("kept")).unwrap(),
        vec![3u8; 5 << 20]
    );
    std::fs::write(target.join("big"), vec![1u8; 60 << 20]).unwrap();
    d.unpublish_and_unstage(&id).await;
}

#[tokio::test]
async fn node_expand_volume_online() {
    require_mounts!();
    if !has_cap_sys_resource() {
        // The kernel allows growing a mounted ext4 only with CAP_SYS_RESOURCE, which a
        // privileged node plugin has; the offline path is tested above.
        eprintln!("SKIPPED: online ext4 resize needs CAP_SYS_RESOURCE, which this process lacks");
        return;
    }
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-node-expand", 32 * MIB, mount_cap()).await;
    let target = d.stage_and_publish(&id, mount_cap(), false).await;
    let before = fs_total(&target);
    assert_eq!(expand(&mut d, &id, 96 * MIB, &target).await, 96 * MIB);
    let after = fs_total(&target);
    assert!(after > before + 50 * (MIB as u64), "{before} -> {after}");
    std::fs::write(target.join("big"), vec![1u8; 60 << 20]).unwrap();
    d.unpublish_and_unstage(&id).await;
}

#[tokio::test]
async fn inline_ephemeral_volume() {
    require_mounts!();
    let mut d = TestDriver::start().await;
    let target = d.path("target/ephemeral");
    let id = "csi-0123456789abcdef";
    let request = |size: &str| NodePublishVolumeRequest {
        volume_id: id.into(),
        target_path: target.display().to_string(),
        volume_capability: Some(mount_cap()),
        volume_context: [
            (
                "csi.storage.k8s.io/ephemeral".to_string(),
                "true".to_string(),
            ),
            ("size".to_string(), size.to_string()),
        ]
        .into(),
        ..Default::default()
    };
    let refused = d
        .node
        .node_publish_volume(request("16MB"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(
        refused.message(),
        "ephemeral volume size: \"16MB\" is not a valid quantity: unknown suffix"
    );
    assert!(!target.exists(), "nothing is left of a refused publish");
    d.node.node_publish_volume(request("16Mi")).await.unwrap();
    std::fs::write(target.join("scratch"), b"ephemeral").unwrap();
    let vfs = rustix::fs::statvfs(&target).unwrap();
    assert!(vfs.f_blocks * vfs.f_frsize <= ferrovirt_hostpath::filesystem::image_len(16 << 20));
    d.node
        .node_unpublish_volume(NodeUnpublishVolumeRequest {
            volume_id: id.into(),
            target_path: target.display().to_string(),
        })
        .await
        .unwrap();
    assert!(!target.exists());
    // The volume is gone with its last publication.
    let gone = d
        .controller
        .controller_get_volume(ControllerGetVolumeRequest {
            volume_id: id.into(),
        })
        .await;
    assert_eq!(code(gone), Code::NotFound);
    assert!(!d.path("pool/csi").join(id).exists());
}

#[tokio::test]
async fn published_volume_images_are_sparse() {
    // Provisioning is a metadata operation: a fresh 1 GiB volume occupies (almost) nothing.
    let mut d = TestDriver::start().await;
    let id = d.create("pvc-sparse", 1024 * MIB, mount_cap()).await;
    let image = d.path("pool/csi").join(&id).join("volume.img");
    let meta = std::fs::metadata(image).unwrap();
    assert_eq!(
        meta.len(),
        ferrovirt_hostpath::filesystem::image_len(1 << 30)
    );
    assert!(meta.blocks() * 512 < 1 << 20);
}
