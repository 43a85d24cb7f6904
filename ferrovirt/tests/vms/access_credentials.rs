//! `accessCredentials` on `ferrovirt up`: an SSH public key in a Secret reaches the guest in
//! its NoCloud metadata, as KubeVirt puts it there, and logs the user in over `ferrovirt
//! ssh`; a credential whose propagation has no cloud-init volume to go in is refused with
//! virt-api's words.

use super::*;

/// A VM on the fast guest with a NoCloud volume (unless `with_volume` is false) and an SSH
/// key from Secret `keys` propagated by NoCloud.
fn vm_with_key(name: &str, url: &str, with_volume: bool) -> String {
    let mut yaml = vm_yaml(name, "Always", url);
    if with_volume {
        yaml = yaml.replace(
        "          disks:\n          - name: root\n            disk:\n              bus: virtio\n",
        "          disks:\n          - name: root\n            disk:\n              bus: virtio\n          - name: seed\n            disk:\n              bus: virtio\n",
    );
        yaml.push_str("      - name: seed\n        cloudInitNoCloud:\n          userData: \"#cloud-config\"\n");
    }
    yaml.push_str(
        "      accessCredentials:
      - sshPublicKey:
          source:
            secret:
              secretName: keys
          propagationMethod:
            noCloud: {}
",
    );
    yaml
}

#[test]
fn an_ssh_key_reaches_the_guest_by_no_cloud_and_logs_in() {
    let _booting = one_at_a_time();
    let server = HttpServer::start(HttpServerOptions::default());
    let platform = Platform::start("access-credentials");
    let url = server.url(fast_guest_qcow2());

    let refused = platform.kubectl(
        &["apply", "-f", "-"],
        Some(&vm_with_key("nokey", &url, false)),
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "a key with nowhere to go was accepted"
    );
    assert!(
        stderr.contains(
            "spec.template.spec.accessCredentials[0] requires a noCloud volume to exist when \
             the noCloud propagationMethod is in use."
        ),
        "{stderr}"
    );

    let key = ferrovirt_tests::TempDir::new("access-cred-key");
    let identity = key.join("id");
    let keygen = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "fv-access-cred",
            "-f",
        ])
        .arg(&identity)
        .status()
        .expect("ssh-keygen");
    assert!(keygen.success());
    let public = std::fs::read_to_string(key.join("id.pub")).expect("the public key");
    platform.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: keys\nstringData:\n  key1: '{}'\n",
        public.trim()
    ));
    platform.apply(&vm_with_key("ak", &url, true));
    running_uid(&platform, "ak");

    // The busybox guest has no cloud-init: it reads the seed's metadata itself and installs
    // the key as cloud-init's ssh module would.
    let mut console = Console::open(&platform, "ak");
    console.run(
        "mount -t iso9660 /dev/vdb /mnt && cat /mnt/meta-data; echo",
        "\"public-keys\":{\"0\":\"ssh-ed25519 ",
    );
    assert!(
        console.text().contains("fv-access-cred\"}"),
        "{}",
        console.text()
    );
    console.send(
        "grep -o 'ssh-ed25519 [^\"]*' /mnt/meta-data > /root/.ssh/authorized_keys && \
         dropbear -R -p 22 && echo SSHD-\"UP\"\n",
    );
    console.wait_for("SSHD-UP", Duration::from_secs(30));
    drop(console);

    let stdout = ssh_as_root(&platform, "vm/ak", &identity, "echo key-login-as-$(whoami)");
    assert!(stdout.contains("key-login-as-root"), "{stdout}");
}
