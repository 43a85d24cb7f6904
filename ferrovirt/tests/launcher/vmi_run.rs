//! `ferrovirt vmi run` with real guests under QEMU (TCG here): the fast guest (Debian's
//! kernel and a busybox initramfs on a BIOS- and EFI-bootable disk) for most checks, and
//! a debootstrapped Debian with cloud-init and qemu-guest-agent for the cloud-init and
//! guest-agent ones. The guests come from `fixtures/guests.sh`.

use crate::guest;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use ferrovirt_tests::registry::{
    ImageSpec, LayerCompression, LayerSpec, OciLayout, RegistryServer, RegistryServerOptions,
};
use ferrovirt_tests::{TempDir, guest as guest_dir, sha256_file};
use guest::{RunningVmi, claim_with, free_port, serve_http};
use virt::launcher::control::{self, proto};

const BOOT: Duration = Duration::from_secs(120);
const DEBIAN_BOOT: Duration = Duration::from_secs(300);

fn fast_vmi(name: &str, extra_spec: &str, devices: &str, volumes: &str) -> String {
    format!(
        "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: {name}
spec:
{extra_spec}
  domain:
    resources:
      requests:
        memory: 256Mi
    devices:
      disks:
      - name: root
        bootOrder: 1
        disk: {{bus: virtio}}
{devices}
  volumes:
{volumes}
"
    )
}

async fn control(vmi: &RunningVmi) -> proto::cmd_client::CmdClient<tonic::transport::Channel> {
    control::connect(vmi.control_socket())
        .await
        .expect("control socket")
}

async fn domain_state(vmi: &RunningVmi) -> serde_json::Value {
    let reply = control(vmi)
        .await
        .get_domain(proto::EmptyRequest {})
        .await
        .expect("GetDomain")
        .into_inner();
    serde_json::from_str(&reply.domain).expect("domain JSON")
}

/// One boot of the fast guest from a raw disk.img on BIOS checks the everyday path: the
/// login prompt on the serial console, SMBIOS serial, a ConfigMap as a CD-ROM, the guest
/// reaching a loopback HTTP server through its masquerade gateway, a forwarded port
/// reaching the guest, VNC, rng and watchdog devices, pause, unpause and reset over the
/// control socket, and an ACPI shutdown after the reboot.
#[tokio::test(flavor = "multi_thread")]
async fn fast_guest_boots_from_a_raw_disk_and_does_the_everyday_things() {
    let fast = guest_dir("fast");
    let work = TempDir::new("vmi-everyday");
    let claim = claim_with(&fast.join("disk.img"), &work.join("claim"));
    let config = work.join("config");
    std::fs::create_dir_all(&config).expect("config dir");
    std::fs::write(config.join("greeting"), "hello from a configmap\n").expect("write");
    let http_port = serve_http("served from the host\n");
    let guest_port = free_port();
    let manifest = fast_vmi(
        "everyday",
        "  terminationGracePeriodSeconds: 30",
        &format!(
            "      - name: config
        cdrom: {{bus: sata}}
      rng: {{}}
      watchdog:
        name: wd
        i6300esb: {{}}
      interfaces:
      - name: default
        masquerade: {{}}
        ports:
        - port: {guest_port}
    firmware:
      serial: FV-SERIAL-42
      bootloader:
        bios:
          useSerial: true
  networks:
  - name: default
    pod: {{}}"
        ),
        "  - name: root
    persistentVolumeClaim:
      claimName: root
  - name: config
    configMap:
      name: app",
    );
    let mut vmi = RunningVmi::start(
        "everyday",
        &manifest,
        &[
            format!("--volume=root={}", claim.display()),
            format!("--volume=config={}", config.display()),
        ],
    );
    let booted = vmi.wait_for_serial("login:", BOOT);
    assert!(
        vmi.serial().contains("SeaBIOS"),
        "bios.useSerial shows SeaBIOS on the serial console"
    );
    eprintln!("login prompt after {booted:?}");

    let mut vnc =
        std::os::unix::net::UnixStream::connect(vmi.run_dir.join("virt-vnc")).expect("VNC socket");
    let mut banner = [0u8; 12];
    vnc.read_exact(&mut banner).expect("RFB banner");
    assert!(banner.starts_with(b"RFB 003."), "{banner:?}");
    drop(vnc);

    let mut shell = vmi.login();
    assert_eq!(shell.ok("hostname").trim(), "fastguest");
    assert_eq!(
        shell
            .ok("cat /sys/class/misc/hw_random/rng_current")
            .trim()
            .split('.')
            .next(),
        Some("virtio_rng")
    );
    shell.ok("test -c /dev/watchdog");
    assert_eq!(
        shell.ok("cat /sys/class/dmi/id/product_serial").trim(),
        "FV-SERIAL-42"
    );
    assert_eq!(
        shell
            .ok("mount -t iso9660 /dev/sr0 /mnt && cat /mnt/greeting")
            .trim(),
        "hello from a configmap"
    );
    assert_eq!(shell.ok("cat /sys/class/net/eth0/address").trim().len(), 17);
    let fetched = shell.ok(&format!("wget -q -O - http://10.0.2.1:{http_port}/file"));
    assert_eq!(fetched.trim(), "served from the host");

    shell.ok(&format!("httpd -p {guest_port} -h /www"));
    let page = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let attempt =
                std::net::TcpStream::connect(("127.0.0.1", guest_port)).and_then(|mut s| {
                    s.set_read_timeout(Some(Duration::from_secs(10)))?;
                    s.write_all(b"GET / HTTP/1.0\r\n\r\n")?;
                    let mut body = String::new();
                    s.read_to_string(&mut body)?;
                    Ok(body)
                });
            match attempt {
                Ok(body) if body.contains("200") => return body,
                _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
                other => panic!("the forwarded port did not answer: {other:?}"),
            }
        }
    })
    .await
    .expect("port check");
    let index = shell.ok("cat /www/index.html");
    assert!(
        page.contains(index.trim()),
        "the forwarded port serves the guest's page: {page}"
    );

    let mut client = control(&vmi).await;
    let reply = client
        .pause_virtual_machine(proto::EmptyRequest {})
        .await
        .expect("pause")
        .into_inner();
    assert!(reply.success, "{}", reply.message);
    assert_eq!(domain_state(&vmi).await["state"], "Paused");
    assert_eq!(domain_state(&vmi).await["reason"], "User");
    shell.send(b"echo unpaused-$((40+2))\n");
    assert!(
        !shell.shows_within("unpaused-42", Duration::from_secs(2)),
        "a paused guest runs nothing"
    );
    let reply = client
        .unpause_virtual_machine(proto::EmptyRequest {})
        .await
        .expect("unpause")
        .into_inner();
    assert!(reply.success, "{}", reply.message);
    assert!(
        shell.shows_within("unpaused-42", Duration::from_secs(30)),
        "the guest resumes"
    );
    assert_eq!(domain_state(&vmi).await["state"], "Running");
    assert_eq!(domain_state(&vmi).await["softwareEmulation"], true);

    let reply = client
        .reset_virtual_machine(proto::EmptyRequest {})
        .await
        .expect("reset")
        .into_inner();
    assert!(reply.success, "{}", reply.message);
    let deadline = Instant::now() + BOOT;
    while vmi.serial().matches("FERROVIRT-GUEST-READY").count() < 2 {
        assert!(
            Instant::now() < deadline,
            "the guest did not boot again after a reset:\n{}",
            vmi.serial()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    vmi.terminate();
    let (status, log) = vmi.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{log}");
    assert!(log.contains("shut down: the guest powered off"), "{log}");
    assert!(!vmi.run_dir.exists(), "the run directory is cleaned up");
}

/// EFI boot with OVMF, then a guest that ignores the power button is killed when the
/// grace period ends, and says so.
#[tokio::test(flavor = "multi_thread")]
async fn efi_boot_and_a_guest_ignoring_acpi_is_destroyed_after_the_grace_period() {
    let fast = guest_dir("fast");
    let work = TempDir::new("vmi-efi");
    let claim = claim_with(&fast.join("disk.img"), &work.join("claim"));
    let manifest = fast_vmi(
        "efi",
        "  terminationGracePeriodSeconds: 4",
        "    firmware:
      bootloader:
        efi:
          secureBoot: false",
        "  - name: root
    persistentVolumeClaim:
      claimName: root",
    );
    let mut vmi = RunningVmi::start(
        "efi",
        &manifest,
        &[format!("--volume=root={}", claim.display())],
    );
    vmi.wait_for_serial("login:", BOOT);
    assert!(
        vmi.run_dir.join("default_efi_VARS.fd").exists(),
        "a non-persistent EFI variable store lives with the VMI"
    );
    let mut shell = vmi.login();
    shell.ok("test -d /sys/firmware/efi");
    shell.ok("killall acpid");
    let asked = Instant::now();
    vmi.terminate();
    let (status, log) = vmi.wait_exit(Duration::from_secs(30));
    let took = asked.elapsed();
    assert!(!status.success(), "a destroyed domain is a failure: {log}");
    assert!(
        log.contains("did not power off within the grace period of 4s and was killed"),
        "{log}"
    );
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(15),
        "{took:?}"
    );
}

/// A containerDisk pulled from a local registry into the node cache, run under an
/// overlay: what the guest writes never reaches the cached image.
#[tokio::test(flavor = "multi_thread")]
async fn a_container_disk_from_a_local_registry_boots_under_an_overlay() {
    let fast = guest_dir("fast");
    let registry = RegistryServer::start(RegistryServerOptions::default());
    let layout = OciLayout::image(&ImageSpec::new(
        "linux/amd64",
        vec![LayerSpec::disk_file(
            LayerCompression::Gzip,
            &fast.join("disk.img"),
        )],
    ));
    registry.push(&layout, "disks/fast:v1");
    let work = TempDir::new("vmi-containerdisk");
    let cache = work.join("cache");
    let manifest = fast_vmi(
        "cdisk",
        "",
        "",
        &format!(
            "  - name: root
    containerDisk:
      image: {}/disks/fast:v1
      imagePullPolicy: IfNotPresent",
            registry.host()
        ),
    );
    let args = [
        format!("--node-cache={}", cache.display()),
        format!("--insecure-registry={}", registry.host()),
    ];
    let mut vmi = RunningVmi::start("cdisk", &manifest, &args);
    vmi.wait_for_serial("login:", BOOT);
    let mut shell = vmi.login();
    // The guest runs from its initramfs: scribble over the disk's last MiB.
    shell.ok("dd if=/dev/urandom of=/dev/vda bs=1M count=1 seek=63 conv=fsync");
    vmi.terminate();
    let (status, log) = vmi.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{log}");
    let cached: Vec<_> = std::fs::read_dir(cache.join("container-disks"))
        .expect("the cache")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("sha256-"))
        })
        .collect();
    assert_eq!(cached.len(), 1, "one image, keyed by digest: {cached:?}");
    assert_eq!(
        sha256_file(&cached[0].join("disk.img")).expect("hash"),
        sha256_file(&fast.join("disk.img")).expect("hash"),
        "the cached image is untouched by the guest's writes"
    );

    // IfNotPresent: with the registry gone, the cached image still boots.
    drop(registry);
    let mut again = RunningVmi::start("cdisk", &manifest, &args);
    again.wait_for_serial("login:", BOOT);
    again.terminate();
    let (status, log) = again.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{log}");
}

/// Bad input is refused before anything runs, with a message that names the problem.
#[test]
fn bad_input_is_refused_naming_the_problem_and_nothing_is_left_running() {
    let work = TempDir::new("vmi-bad");
    let claim_file = work.join("not-a-dir.img");
    std::fs::write(&claim_file, b"x").expect("write");
    let cases: Vec<(&str, String, Vec<String>, &str)> = vec![
        (
            "tpm",
            fast_vmi(
                "tpm",
                "",
                "      tpm: {}",
                "  - name: root\n    emptyDisk:\n      capacity: 64Mi",
            ),
            vec![],
            "spec.domain.devices.tpm: not supported by this launcher",
        ),
        (
            "sb",
            fast_vmi(
                "sb",
                "",
                "    firmware:\n      bootloader:\n        efi: {}",
                "  - name: root\n    emptyDisk:\n      capacity: 64Mi",
            ),
            vec![],
            "SecureBoot requires SMM, which is currently disabled",
        ),
        (
            "file",
            fast_vmi(
                "file",
                "",
                "",
                "  - name: root\n    persistentVolumeClaim:\n      claimName: c",
            ),
            vec![format!("--volume=root={}", claim_file.display())],
            "must be the claim's directory (holding disk.img) or a block device",
        ),
        (
            "unbacked",
            fast_vmi(
                "unbacked",
                "",
                "",
                "  - name: root\n    persistentVolumeClaim:\n      claimName: c",
            ),
            vec![],
            "give one with --volume root=PATH",
        ),
        (
            "never",
            fast_vmi(
                "never",
                "",
                "",
                "  - name: root\n    containerDisk:\n      image: 127.0.0.1:9/none:v1\n      imagePullPolicy: Never",
            ),
            vec![format!("--node-cache={}", work.join("cache").display())],
            "127.0.0.1:9/none:v1 is not in the node's cache and imagePullPolicy is Never",
        ),
        (
            "badmachine",
            fast_vmi(
                "badmachine",
                "",
                "    machine:\n      type: pc-q35-1.0",
                "  - name: root\n    emptyDisk:\n      capacity: 64Mi",
            ),
            vec![],
            "QEMU failed to start",
        ),
    ];
    for (name, manifest, args, expected) in cases {
        let mut vmi = RunningVmi::start(name, &manifest, &args);
        let (status, log) = vmi.wait_exit(Duration::from_secs(60));
        assert!(!status.success(), "{name}: {log}");
        assert!(
            log.contains(expected),
            "{name}: expected {expected:?} in:\n{log}"
        );
        assert!(
            !vmi.run_dir.exists(),
            "{name}: the run directory is cleaned up"
        );
    }
}

/// Starts the Debian guest from a fresh copy of its disk, with `cloud_init` as the volume
/// source of its second disk.
fn start_debian(name: &str, cloud_init: &str) -> (RunningVmi, TempDir) {
    let debian = guest_dir("debian");
    let work = TempDir::new(&format!("vmi-{name}"));
    let claim = claim_with(&debian.join("disk.img"), &work.join("claim"));
    let vmi = RunningVmi::start(
        name,
        &debian_vmi(name, cloud_init),
        &[format!("--volume=root={}", claim.display())],
    );
    (vmi, work)
}

fn debian_vmi(name: &str, cloud_init: &str) -> String {
    format!(
        "apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 60
  domain:
    cpu:
      cores: 2
    resources:
      requests:
        memory: 1Gi
    devices:
      disks:
      - name: root
        bootOrder: 1
        disk: {{bus: virtio}}
      - name: cloudinit
        disk: {{bus: virtio}}
  volumes:
  - name: root
    persistentVolumeClaim:
      claimName: root
  - name: cloudinit
{cloud_init}
"
    )
}

/// The real thing: a Debian cloud image's cloud-init applies NoCloud user-data (host name,
/// a runcmd marker), its guest agent reports the OS, and systemd powers off on ACPI.
#[tokio::test(flavor = "multi_thread")]
async fn debian_applies_nocloud_user_data_reports_its_os_and_shuts_down_on_acpi() {
    let (mut vmi, _work) = start_debian(
        "nocloud",
        "    cloudInitNoCloud:
      userData: |
        #cloud-config
        hostname: from-nocloud
        runcmd:
        - echo FV-NOCLOUD-RUNCMD-$(hostname) > /dev/ttyS0",
    );
    let marker = vmi.wait_for_serial("FV-NOCLOUD-RUNCMD-from-nocloud", DEBIAN_BOOT);
    eprintln!("cloud-init runcmd after {marker:?}");
    let deadline = Instant::now() + Duration::from_secs(120);
    let info = loop {
        let reply = control(&vmi)
            .await
            .get_guest_info(proto::EmptyRequest {})
            .await
            .expect("GetGuestInfo")
            .into_inner();
        if !reply.guest_info_response.is_empty() {
            break serde_json::from_str::<serde_json::Value>(&reply.guest_info_response)
                .expect("JSON");
        }
        assert!(
            Instant::now() < deadline,
            "the guest agent never answered\n{}",
            vmi.log()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert_eq!(info["os"]["id"], "debian", "{info}");
    assert_eq!(info["hostname"], "from-nocloud", "{info}");
    assert_eq!(domain_state(&vmi).await["guestAgentConnected"], true);
    vmi.terminate();
    let (status, log) = vmi.wait_exit(Duration::from_secs(90));
    assert!(status.success(), "{log}");
    assert!(log.contains("shut down: the guest powered off"), "{log}");
}

/// ConfigDrive user-data is applied too; a Kill over the control socket destroys the
/// domain at once.
#[tokio::test(flavor = "multi_thread")]
async fn debian_applies_config_drive_user_data() {
    let (mut vmi, _work) = start_debian(
        "configdrive",
        "    cloudInitConfigDrive:
      userData: |
        #cloud-config
        runcmd:
        - echo FV-CONFIGDRIVE-RUNCMD > /dev/ttyS0",
    );
    vmi.wait_for_serial("FV-CONFIGDRIVE-RUNCMD", DEBIAN_BOOT);
    let reply = control(&vmi)
        .await
        .kill_virtual_machine(proto::EmptyRequest {})
        .await
        .expect("Kill")
        .into_inner();
    assert!(reply.success, "{}", reply.message);
    let (status, log) = vmi.wait_exit(Duration::from_secs(30));
    assert!(!status.success());
    assert!(log.contains("destroyed: killed on request"), "{log}");
}

/// A network namespace of the test's own, deleted on drop.
struct NetNs(String);

impl NetNs {
    fn new() -> Self {
        Self::named("")
    }

    /// A namespace of this test process; `suffix` tells its namespaces apart.
    fn named(suffix: &str) -> Self {
        let name = format!("fvtest-{}{suffix}", std::process::id());
        // A namespace left by an earlier, killed run of this test.
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(std::process::Stdio::null())
            .status();
        ip(&["netns", "add", &name]);
        NetNs(name)
    }

    fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", &self.0];
        all.extend_from_slice(args);
        ip(&all);
    }

    fn links(&self) -> String {
        let out = std::process::Command::new("ip")
            .args(["-n", &self.0, "-o", "link", "show"])
            .output()
            .expect("ip link show");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

fn ip(args: &[&str]) {
    let status = std::process::Command::new("ip")
        .args(args)
        .status()
        .expect("ip");
    assert!(status.success(), "ip {args:?} failed");
}

/// The bridge binding on a secondary network: the launcher makes a tap on the node's
/// bridge (here in a network namespace of the test's own), the guest reaches an address
/// on that bridge, and the tap goes when the VMI does.
#[tokio::test(flavor = "multi_thread")]
async fn a_bridge_binding_attaches_the_guest_to_a_node_bridge() {
    let fast = guest_dir("fast");
    let ns = NetNs::new();
    ns.ip(&["link", "set", "lo", "up"]);
    ns.ip(&["link", "add", "br-vm", "type", "bridge"]);
    ns.ip(&["addr", "add", "192.168.231.1/24", "dev", "br-vm"]);
    ns.ip(&["link", "set", "br-vm", "up"]);
    let work = TempDir::new("vmi-bridge");
    let claim = claim_with(&fast.join("disk.img"), &work.join("claim"));
    let manifest = fast_vmi(
        "bridged",
        "",
        "      interfaces:
      - name: default
        masquerade: {}
      - name: secondary
        bridge: {}
        macAddress: \"02:00:00:0a:0b:0c\"
  networks:
  - name: default
    pod: {}
  - name: secondary
    multus:
      networkName: br-vm",
        "  - name: root
    persistentVolumeClaim:
      claimName: root",
    );
    let mut vmi = RunningVmi::start_with(
        "bridged",
        &manifest,
        &[
            format!("--volume=root={}", claim.display()),
            "--bridge=secondary=br-vm".to_owned(),
        ],
        &["ip", "netns", "exec", &ns.0],
    );
    vmi.wait_for_serial("login:", BOOT);
    assert!(
        ns.links().contains("master br-vm"),
        "a tap joined the bridge:\n{}",
        ns.links()
    );
    let mut shell = vmi.login();
    assert_eq!(
        shell.ok("cat /sys/class/net/eth1/address").trim(),
        "02:00:00:0a:0b:0c"
    );
    shell.ok("ip addr add 192.168.231.2/24 dev eth1 && ip link set eth1 up");
    shell.ok("ping -c 3 -W 5 192.168.231.1");
    vmi.terminate();
    let (status, log) = vmi.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{log}");
    assert!(
        !ns.links().contains("fvtap"),
        "the tap is removed:\n{}",
        ns.links()
    );
}

/// A secondary network as on a cluster: a CNI plugin made the pod interface `pod<hash>` (a
/// veth whose peer is on the node's bridge), and the launcher, in the pod's network
/// namespace with no bridge given, bridges that interface to the guest's tap in the pod
/// (KubeVirt's `k6t-<hash>`), handing the guest the interface's MAC address.
#[tokio::test(flavor = "multi_thread")]
async fn a_bridge_binding_on_a_pod_interface_bridges_it_in_the_pod() {
    let fast = guest_dir("fast");
    let node = NetNs::named("-node");
    let pod = NetNs::named("-pod");
    let pod_interface = api::network_attachment::pod_interface_name("secondary");
    node.ip(&["link", "add", "br-node", "type", "bridge"]);
    node.ip(&["addr", "add", "192.168.232.1/24", "dev", "br-node"]);
    node.ip(&["link", "set", "br-node", "up"]);
    node.ip(&[
        "link",
        "add",
        "veth-node",
        "type",
        "veth",
        "peer",
        "name",
        &pod_interface,
    ]);
    node.ip(&["link", "set", &pod_interface, "netns", &pod.0]);
    node.ip(&["link", "set", "veth-node", "master", "br-node", "up"]);
    pod.ip(&["link", "set", "lo", "up"]);
    pod.ip(&[
        "link",
        "set",
        &pod_interface,
        "address",
        "0a:58:c0:a8:e8:07",
        "up",
    ]);
    let work = TempDir::new("vmi-pod-bridge");
    let claim = claim_with(&fast.join("disk.img"), &work.join("claim"));
    let manifest = fast_vmi(
        "podbridged",
        "",
        "      interfaces:
      - name: default
        masquerade: {}
      - name: secondary
        bridge: {}
  networks:
  - name: default
    pod: {}
  - name: secondary
    multus:
      networkName: br-net",
        "  - name: root
    persistentVolumeClaim:
      claimName: root",
    );
    let mut vmi = RunningVmi::start_with(
        "podbridged",
        &manifest,
        &[format!("--volume=root={}", claim.display())],
        &["ip", "netns", "exec", &pod.0],
    );
    vmi.wait_for_serial("login:", BOOT);
    let links = pod.links();
    let bridge = format!("k6t-{}", &pod_interface[3..]);
    let ports: Vec<&str> = links
        .lines()
        .filter(|l| l.contains(&format!("master {bridge} ")))
        .collect();
    assert!(
        ports.len() == 2
            && ports
                .iter()
                .any(|l| l.contains(&format!("{pod_interface}@")))
            && ports.iter().any(|l| l.contains("fvtap")),
        "the pod interface and a tap joined the in-pod bridge {bridge}:\n{links}"
    );
    let mut shell = vmi.login();
    assert_eq!(
        shell.ok("cat /sys/class/net/eth1/address").trim(),
        "0a:58:c0:a8:e8:07",
        "the guest has the pod interface's MAC"
    );
    shell.ok("ip addr add 192.168.232.2/24 dev eth1 && ip link set eth1 up");
    shell.ok("ping -c 3 -W 5 192.168.232.1");
    vmi.terminate();
    let (status, log) = vmi.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{log}");
}
