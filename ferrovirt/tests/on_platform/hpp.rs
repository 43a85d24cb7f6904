//! The HostPathProvisioner operator on `ferrovirt up`: a CR with two storage pools makes the
//! running CSI driver serve both without a restart, two StorageClasses with `storagePool`
//! give working claims whose volumes land in each pool's directory, the CR reports its pools
//! Ready and the operator conditions as hostpath-provisioner-operator does, the pools survive
//! a restart, a pool taken out of the CR keeps its volumes, and bad CRs are refused with the
//! upstream webhook's messages.

use crate::platform;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferrovirt_tests::{HttpServer, HttpServerOptions, TempDir, reference_sha256, reference_size};
use platform::{Platform, condition, digest_prefix};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

fn hpp_yaml(pools: &[(&str, &Path)]) -> String {
    let mut yaml = String::from(
        "apiVersion: hostpathprovisioner.kubevirt.io/v1beta1\nkind: HostPathProvisioner\n\
         metadata:\n  name: hostpath-provisioner\nspec:\n  imagePullPolicy: IfNotPresent\n  \
         storagePools:\n",
    );
    for (name, path) in pools {
        yaml.push_str(&format!("  - name: {name}\n    path: {}\n", path.display()));
    }
    yaml
}

fn storage_class(name: &str, pool: &str) -> String {
    format!(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: {name}\n\
         provisioner: kubevirt.io.hostpath-provisioner\nparameters:\n  storagePool: {pool}\n\
         reclaimPolicy: Delete\nvolumeBindingMode: WaitForFirstConsumer\n"
    )
}

fn datavolume(name: &str, class: &str, source: &str) -> String {
    format!(
        "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata:\n  name: {name}\n\
         spec:\n  source:\n{source}  pvc:\n    storageClassName: {class}\n    accessModes:\n\
         \x20   - ReadWriteOnce\n    resources:\n      requests:\n        storage: 64Mi\n"
    )
}

fn wait_for(what: &str, platform: &Platform, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + LIMIT;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen in {LIMIT:?}:\n{}\n--- log:\n{}",
            platform
                .json(&["get", "hostpathprovisioner", "hostpath-provisioner"])
                .map(|v| serde_json::to_string_pretty(&v).unwrap_or_default())
                .unwrap_or_default(),
            platform.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn hpp(platform: &Platform) -> Value {
    platform
        .json(&["get", "hostpathprovisioner", "hostpath-provisioner"])
        .unwrap_or(Value::Null)
}

/// The CR's pool names and phases, and whether it is Available, not Progressing and not
/// Degraded.
fn pools_and_health(hpp: &Value) -> (Vec<(String, String)>, bool) {
    let pools = hpp["status"]["storagePoolStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let text = |k: &str| p[k].as_str().unwrap_or_default().to_owned();
            (text("name"), text("phase"))
        })
        .collect();
    let is =
        |type_: &str, status: &str| condition(hpp, type_).is_some_and(|c| c["status"] == status);
    let healthy = is("Available", "True") && is("Progressing", "False") && is("Degraded", "False");
    (pools, healthy)
}

fn ready(names: &[&str]) -> Vec<(String, String)> {
    names
        .iter()
        .map(|n| (n.to_string(), "Ready".to_string()))
        .collect()
}

/// The volume image of the claim `pvc` in the pool directory `pool`.
fn volume_image(platform: &Platform, pool: &Path, pvc: &str) -> PathBuf {
    let claim = platform.json(&["get", "pvc", pvc]).expect("the PVC exists");
    let pv = claim["spec"]["volumeName"]
        .as_str()
        .expect("the PVC is bound");
    let volume = platform.json(&["get", "pv", pv]).expect("the PV exists");
    let handle = volume["spec"]["csi"]["volumeHandle"]
        .as_str()
        .expect("a CSI volume");
    pool.join("csi").join(handle).join("volume.img")
}

/// Copies `/disk.img` out of an ext4 volume image with debugfs.
fn extract_disk(image: &Path, out: &Path) {
    let status = Command::new("debugfs")
        .arg("-R")
        .arg(format!("dump /disk.img {}", out.display()))
        .arg(image)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("running debugfs");
    assert!(
        status.success() && out.exists(),
        "no disk.img in {}",
        image.display()
    );
}

fn refused(platform: &Platform, yaml: &str) -> String {
    let out = platform.kubectl(&["apply", "-f", "-"], Some(yaml));
    assert!(!out.status.success(), "accepted:\n{yaml}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn two_pools_of_the_cr_serve_storage_classes_without_a_restart_and_after_one() {
    let server = HttpServer::start(HttpServerOptions::default());
    let pools = TempDir::new("hpp-pools");
    let (fast, slow) = (pools.join("fast"), pools.join("slow"));
    let mut platform = Platform::start("hpp");

    platform.apply(&hpp_yaml(&[("fast", &fast), ("slow", &slow)]));
    wait_for("the pools Ready and the CR Available", &platform, || {
        pools_and_health(&hpp(&platform)) == (ready(&["fast", "slow"]), true)
    });
    let cr = hpp(&platform);
    let available = condition(&cr, "Available").expect("Available");
    assert_eq!(available["reason"], "Complete");
    assert_eq!(available["message"], "Application Available");
    assert!(cr["status"]["observedVersion"].is_string());
    assert!(
        cr["metadata"]["finalizers"].as_array().is_some_and(|f| f
            .iter()
            .any(|f| f == "finalizer.delete.hostpath-provisioner")),
        "{cr}"
    );

    platform.apply(&storage_class("hpp-fast", "fast"));
    platform.apply(&storage_class("hpp-slow", "slow"));
    let image = "v3.qcow2.xz";
    platform.apply(&datavolume("on-fast", "hpp-fast", "    blank: {}\n"));
    let http = format!("    http:\n      url: \"{}\"\n", server.url(image));
    platform.apply(&datavolume("on-slow", "hpp-slow", &http));
    for name in ["on-fast", "on-slow"] {
        platform.wait_phase("default", name, "Succeeded", LIMIT);
    }
    let fast_image = volume_image(&platform, &fast, "on-fast");
    let slow_image = volume_image(&platform, &slow, "on-slow");
    assert!(fast_image.exists(), "{} missing", fast_image.display());
    let scratch = TempDir::new("hpp-disk");
    extract_disk(&fast_image, &scratch.join("fast.img"));
    let check_slow = |name: &str| {
        let out = scratch.join(name);
        extract_disk(&slow_image, &out);
        let (digest, zero_tail) = digest_prefix(&out, reference_size(image));
        assert_eq!(digest, reference_sha256(image), "the import in pool slow");
        assert!(zero_tail);
    };
    check_slow("slow-1.img");

    // After a kill and restart the driver serves the CR's pools again at once.
    platform.kill_and_restart();
    platform.apply(&datavolume("after-restart", "hpp-fast", "    blank: {}\n"));
    platform.wait_phase("default", "after-restart", "Succeeded", LIMIT);
    assert!(volume_image(&platform, &fast, "after-restart").exists());
    check_slow("slow-2.img");

    // Taken out of the CR, pool slow keeps its volume (nothing is deleted) and takes no new
    // ones; the CR lists only fast.
    platform.apply(&hpp_yaml(&[("fast", &fast)]));
    wait_for("pool slow gone from the status", &platform, || {
        pools_and_health(&hpp(&platform)) == (ready(&["fast"]), true)
    });
    check_slow("slow-3.img");
    let events = platform.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=StoragePoolRetained",
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert!(events.contains("storage pool \"slow\""), "{events}");
    // Put back, it serves again.
    platform.apply(&hpp_yaml(&[("fast", &fast), ("slow", &slow)]));
    platform.apply(&datavolume("slow-again", "hpp-slow", "    blank: {}\n"));
    platform.wait_phase("default", "slow-again", "Succeeded", LIMIT);
    assert!(volume_image(&platform, &slow, "slow-again").exists());
}

#[test]
fn bad_crs_are_refused_with_upstream_messages_and_pvc_templates_degrade() {
    let pools = TempDir::new("hpp-bad-pools");
    let platform = Platform::start("hpp-bad");
    let both = format!(
        "{}  pathConfig:\n    path: /var/hpvolumes\n",
        hpp_yaml(&[("a", &pools.join("a"))])
    );
    let err = refused(&platform, &both);
    assert!(
        err.contains("pathConfig and storage pools cannot be both set"),
        "{err}"
    );
    let neither = "apiVersion: hostpathprovisioner.kubevirt.io/v1beta1\nkind: HostPathProvisioner\n\
                   metadata:\n  name: hostpath-provisioner\nspec: {}\n";
    let err = refused(&platform, neither);
    assert!(
        err.contains("either pathConfig or storage pools must be set"),
        "{err}"
    );
    let duplicate = hpp_yaml(&[("a", &pools.join("a")), ("a", &pools.join("b"))]);
    let err = refused(&platform, &duplicate);
    assert!(
        err.contains(
            "spec.storagePools[1].name is the same as spec.storagePools[0].name, cannot have duplicate names"
        ),
        "{err}"
    );
    let same_path = hpp_yaml(&[("a", &pools.join("a")), ("b", &pools.join("a"))]);
    let err = refused(&platform, &same_path);
    assert!(err.contains("cannot have duplicate paths"), "{err}");
    let err = refused(&platform, &hpp_yaml(&[("a", Path::new("\"\""))]));
    assert!(err.contains("storagePool.path cannot be blank"), "{err}");
    let long = "n".repeat(51);
    let err = refused(&platform, &hpp_yaml(&[(&long, &pools.join("a"))]));
    assert!(
        err.contains("storagePool.name cannot have a length greater than 50"),
        "{err}"
    );
    assert!(
        platform
            .json(&["get", "hostpathprovisioner"])
            .is_some_and(|l| l["items"].as_array().is_some_and(Vec::is_empty))
    );
    // Upstream fields kept without effect are taken with a warning naming each.
    let unacted = format!(
        "{}    snapshotProvider: reflink\n",
        hpp_yaml(&[("a", &pools.join("a"))])
    );
    let out = platform.kubectl(&["apply", "--dry-run=server", "-f", "-"], Some(&unacted));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("Warning: spec.storagePools[0].snapshotProvider: kept, but"),
        "{said}"
    );

    // A pvcTemplate pool whose claim cannot bind (no such StorageClass) keeps the CR Degraded
    // with upstream's reason and message; the path pool next to it is served.
    platform.apply(&templated_hpp(
        &pools.join("a"),
        &pools.join("big"),
        "missing",
    ));
    wait_for("the CR Degraded", &platform, || {
        condition(&hpp(&platform), "Degraded").is_some_and(|c| c["status"] == "True")
    });
    let cr = hpp(&platform);
    let degraded = condition(&cr, "Degraded").expect("Degraded");
    assert_eq!(degraded["reason"], "StoragePoolNotReady");
    let message = degraded["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("error: Pool PVC hpp-pool-big-")
            && message.ends_with(" is Pending instead of Bound"),
        "{degraded}"
    );
    assert_eq!(
        condition(&cr, "Available").expect("Available")["status"],
        "False"
    );
    let statuses = &cr["status"]["storagePoolStatuses"];
    assert_eq!(statuses[0]["name"], "a");
    assert_eq!(statuses[0]["phase"], "Ready");
    assert_eq!(statuses[1]["name"], "big");
    assert_eq!(statuses[1]["phase"], "Preparing");
    assert_eq!(statuses[1]["desiredReady"], 1);
    assert_eq!(
        statuses[1]["claimStatuses"][0]["status"]["phase"],
        "Pending"
    );
}

/// A HostPathProvisioner with path pool `a` and pool `big` on a claim of `class`.
fn templated_hpp(a: &Path, big: &Path, class: &str) -> String {
    format!(
        "{}  - name: big\n    path: {}\n    pvcTemplate:\n      storageClassName: {class}\n      \
         accessModes: [ReadWriteOnce]\n      resources:\n        requests:\n          storage: 256Mi\n",
        hpp_yaml(&[("a", a)]),
        big.display()
    )
}

fn mounted(path: &Path) -> bool {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let path = path.display().to_string();
    mountinfo
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(path.as_str()))
}

#[test]
fn a_pvc_template_pool_is_a_claim_mounted_at_its_path() {
    let pools = TempDir::new("hpp-claim-pools");
    let big = pools.join("big");
    let mut platform = Platform::start("hpp-claim");
    platform.apply(&templated_hpp(&pools.join("a"), &big, "hostpath-csi"));
    wait_for("the pools Ready and the CR Available", &platform, || {
        pools_and_health(&hpp(&platform)) == (ready(&["a", "big"]), true)
    });
    let cr = hpp(&platform);
    let big_status = &cr["status"]["storagePoolStatuses"][1];
    assert_eq!(big_status["desiredReady"], 1);
    assert_eq!(big_status["currentReady"], 1);
    let claim = big_status["claimStatuses"][0]["name"]
        .as_str()
        .expect("a claim");
    assert!(claim.starts_with("hpp-pool-big-"), "{claim}");
    assert_eq!(big_status["claimStatuses"][0]["status"]["phase"], "Bound");
    let backing = platform
        .json(&["get", "pvc", "-n", "hostpath-provisioner", claim])
        .expect("the pool's claim");
    assert_eq!(
        backing["metadata"]["labels"]["kubevirt.io.hostpath-provisioner/storagePool"],
        "big-hpp"
    );
    assert!(mounted(&big), "{} is not a mount point", big.display());

    platform.apply(&storage_class("hpp-big", "big"));
    platform.apply(&datavolume("on-big", "hpp-big", "    blank: {}\n"));
    platform.wait_phase("default", "on-big", "Succeeded", LIMIT);
    let image = volume_image(&platform, &big, "on-big");
    assert!(image.exists(), "{} missing", image.display());

    // A restart finds the pool mounted and served.
    platform.kill_and_restart();
    platform.apply(&datavolume("on-big-2", "hpp-big", "    blank: {}\n"));
    platform.wait_phase("default", "on-big-2", "Succeeded", LIMIT);
    let second = volume_image(&platform, &big, "on-big-2");
    assert!(second.exists() && image.exists());
    platform.ok(&["delete", "datavolume", "on-big-2", "--wait=true"]);
    wait_for("the second volume deleted", &platform, || !second.exists());

    // Emptied and deleted, the CR takes its pools with it and the claim's volume is unmounted.
    platform.ok(&["delete", "datavolume", "on-big", "--wait=true"]);
    wait_for("the volume deleted", &platform, || !image.exists());
    platform.ok(&[
        "delete",
        "hostpathprovisioner",
        "hostpath-provisioner",
        "--wait=true",
    ]);
    wait_for("the pool unmounted", &platform, || !mounted(&big));
}

/// Unmounts `path` (lazily) on drop, so a failed test leaves no mount behind.
struct MountGuard(PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .stderr(Stdio::null())
            .status();
    }
}

/// `ferrovirt hpp-pool-mounter` as a `pvcTemplate` pool's Deployment runs it on a cluster
/// node: the claim mounted at `--source` is bind-mounted over the pool's path under the
/// host's root, `--check` (its readiness probe) says so, what is written there lands on the
/// claim, and the mount outlives the mounter, which a successor keeps; a path already
/// mounted from something else, and a target that is not absolute, are refused by name.
#[test]
fn the_pool_mounter_mounts_the_claim_over_the_pools_path_and_keeps_it() {
    let dir = TempDir::new("pool-mounter");
    let source = dir.path().join("claim");
    let host = dir.path().join("host");
    std::fs::create_dir_all(&source).expect("the claim");
    std::fs::write(source.join("data"), "claim").expect("a file on the claim");
    let pool = host.join("var/pool");
    let _guard = MountGuard(pool.clone());
    let mounter = |extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ferrovirt"));
        command
            .arg("hpp-pool-mounter")
            .arg("--source")
            .arg(&source)
            .args(["--target", "/var/pool", "--host-root"])
            .arg(&host)
            .args(extra);
        command
    };
    let check = || mounter(&["--check"]).output().expect("--check");
    let not_yet = check();
    assert!(!not_yet.status.success());
    assert!(
        String::from_utf8_lossy(&not_yet.stderr)
            .contains("the pool's claim is not mounted at /var/pool"),
        "{not_yet:?}"
    );
    let stop = |child: &mut std::process::Child| {
        rustix::process::kill_process(
            rustix::process::Pid::from_child(child),
            rustix::process::Signal::TERM,
        )
        .expect("SIGTERM");
        let status = child.wait().expect("the mounter ends");
        assert!(status.success(), "{status}");
    };
    let mut first = mounter(&[]).spawn().expect("starting the mounter");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().status.success() {
        assert!(Instant::now() < deadline, "the pool never showed mounted");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        std::fs::read_to_string(pool.join("data")).expect("via the pool"),
        "claim"
    );
    std::fs::write(pool.join("volume"), "data").expect("writing into the pool");
    assert!(source.join("volume").exists(), "written on the claim");
    stop(&mut first);
    assert!(check().status.success(), "the mount outlives its mounter");
    let mut second = mounter(&[]).spawn().expect("starting a successor");
    std::thread::sleep(Duration::from_millis(300));
    stop(&mut second);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let at_pool = mounts
        .lines()
        .filter(|l| l.split(' ').nth(4) == Some(pool.to_str().unwrap_or_default()))
        .count();
    assert_eq!(
        at_pool, 1,
        "the successor kept the mount instead of stacking another"
    );

    // Something else mounted at a pool's path is not covered up.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).expect("another directory");
    let elsewhere = host.join("var/elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("the path");
    let _other_guard = MountGuard(elsewhere.clone());
    let bound = Command::new("mount")
        .arg("--bind")
        .arg(&other)
        .arg(&elsewhere)
        .status()
        .expect("mount");
    assert!(bound.success());
    let refused = Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .arg("hpp-pool-mounter")
        .arg("--source")
        .arg(&source)
        .args(["--target", "/var/elsewhere", "--host-root"])
        .arg(&host)
        .output()
        .expect("running the mounter");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("/var/elsewhere is a mount point of something else"),
        "{stderr}"
    );

    // The cleanup Job's run: a foreign mount is left, the pool's taken off, and a second
    // run finds nothing to do.
    let unmount = |target: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
            .args([
                "hpp-pool-mounter",
                "--unmount",
                "--target",
                target,
                "--host-root",
            ])
            .arg(&host)
            .output()
            .expect("running the mounter");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let left = unmount("/var/elsewhere");
    assert!(
        left.contains("something else than this pool's claim; leaving it"),
        "{left}"
    );
    let mounts = || std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    assert!(mounts().contains(elsewhere.to_str().unwrap_or_default()));
    // Another claim at the same path (a pool renamed, or removed and added again) neither
    // takes this mount for its own nor unmounts it.
    let other_claim = mounter(&["--claim", "hpp-pool-renamed-node"])
        .output()
        .expect("running the mounter");
    assert!(!other_claim.status.success());
    assert!(
        String::from_utf8_lossy(&other_claim.stderr).contains("is a mount point of something else"),
        "{other_claim:?}"
    );
    let output = Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args([
            "hpp-pool-mounter",
            "--unmount",
            "--claim",
            "hpp-pool-renamed-node",
        ])
        .args(["--target", "/var/pool", "--host-root"])
        .arg(&host)
        .output()
        .expect("running the mounter");
    assert!(output.status.success(), "{output:?}");
    assert!(
        check().status.success(),
        "another claim's cleanup left the pool mounted"
    );
    let done = unmount("/var/pool");
    assert!(done.contains("pool unmounted from /var/pool"), "{done}");
    assert!(!check().status.success(), "the pool is no longer mounted");
    assert!(
        !pool.join("volume").exists(),
        "the bare directory shows again"
    );
    assert!(source.join("volume").exists(), "the claim keeps its data");
    let again = unmount("/var/pool");
    assert!(again.contains("nothing is mounted at /var/pool"), "{again}");

    let relative = Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args(["hpp-pool-mounter", "--target", "var/pool", "--host-root"])
        .arg(&host)
        .output()
        .expect("running the mounter");
    assert!(!relative.status.success());
    let stderr = String::from_utf8_lossy(&relative.stderr);
    assert!(
        stderr.contains("--target var/pool: not an absolute path"),
        "{stderr}"
    );
}

/// Detaches a loop device when the test ends.
struct LoopGuard(String);

impl Drop for LoopGuard {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// A block claim's mounter (`--device`, as a Block `pvcTemplate`'s Deployment runs it): a
/// blank device is formatted ext4 and mounted at the pool's path, a second mounter keeps its
/// data (no second format), and a device that holds something else is refused, untouched.
#[test]
fn the_pool_mounter_formats_a_blank_block_claim_and_never_one_with_data() {
    let dir = TempDir::new("pool-mounter-block");
    let host = dir.path().join("host");
    let pool = host.join("var/block");
    std::fs::create_dir_all(&pool).expect("the pool's path");
    let _mount = MountGuard(pool.clone());
    let attach = |name: &str, fill: &[u8]| {
        let image = dir.path().join(name);
        let file = std::fs::File::create(&image).expect("an image");
        file.set_len(64 << 20).expect("64 MiB");
        std::fs::write(&image, fill).expect("its first bytes");
        file.set_len(64 << 20).expect("64 MiB again");
        let output = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&image)
            .output()
            .expect("losetup");
        assert!(output.status.success(), "{output:?}");
        let device = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        (device.clone(), LoopGuard(device))
    };
    let mounter = |device: &str, target: &str, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
            .args(["hpp-pool-mounter", "--device", device, "--target", target])
            .arg("--host-root")
            .arg(&host)
            .args(extra)
            .spawn()
            .expect("starting the mounter")
    };
    let check = |target: &str| {
        Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
            .args([
                "hpp-pool-mounter",
                "--check",
                "--target",
                target,
                "--host-root",
            ])
            .arg(&host)
            .status()
            .expect("--check")
            .success()
    };
    let stop = |mut child: std::process::Child| {
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&child),
            rustix::process::Signal::TERM,
        )
        .expect("SIGTERM");
        assert!(child.wait().expect("the mounter ends").success());
    };
    let wait_mounted = |target: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !check(target) {
            assert!(Instant::now() < deadline, "{target} never showed mounted");
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    let (blank, _blank_guard) = attach("blank.img", &[]);
    let first = mounter(&blank, "/var/block", &[]);
    wait_mounted("/var/block");
    std::fs::write(pool.join("volume"), "data").expect("writing into the pool");
    stop(first);
    let unmounted = Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args([
            "hpp-pool-mounter",
            "--unmount",
            "--target",
            "/var/block",
            "--host-root",
        ])
        .arg(&host)
        .status()
        .expect("--unmount");
    assert!(unmounted.success());
    assert!(!pool.join("volume").exists(), "unmounted");
    let second = mounter(&blank, "/var/block", &[]);
    wait_mounted("/var/block");
    assert_eq!(
        std::fs::read_to_string(pool.join("volume")).expect("the data again"),
        "data",
        "the filesystem was not made again"
    );
    stop(second);

    // A device with anything on it but ext4 (here an XFS superblock's magic) is refused.
    let (used, _used_guard) = attach("used.img", b"XFSB");
    let elsewhere = host.join("var/used");
    std::fs::create_dir_all(&elsewhere).expect("its path");
    let _used_mount = MountGuard(elsewhere.clone());
    let output = Command::new(env!("CARGO_BIN_EXE_ferrovirt"))
        .args([
            "hpp-pool-mounter",
            "--device",
            &used,
            "--target",
            "/var/used",
            "--host-root",
        ])
        .arg(&host)
        .output()
        .expect("running the mounter");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("holds data that is not an ext4 filesystem; not formatting it"),
        "{stderr}"
    );
    let start = std::fs::read(dir.path().join("used.img")).expect("the image");
    assert_eq!(&start[..4], b"XFSB", "the device is untouched");
    assert!(start[4..1 << 20].iter().all(|b| *b == 0));
}
