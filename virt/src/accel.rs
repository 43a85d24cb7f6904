//! Whether /dev/kvm really runs guests. On some machines it exists, opens, and runs guests
//! many times slower than TCG would: nested virtualisation without unrestricted-guest
//! support makes KVM emulate every real-mode instruction, which is what firmware and boot
//! loaders run. Its presence proves nothing, and neither does a fixed time limit: a loaded
//! node slows any probe down. So the probe boots one 64 KiB firmware image of our own
//! (a real-mode loop of a million iterations, then a write to QEMU's `isa-debug-exit`
//! port) under KVM and under TCG, one after the other, and keeps KVM only when it is not
//! clearly the slower of the two. Here KVM takes over half a second and TCG 50 ms; on a
//! working host both are QEMU's start-up time. The answer is cached per boot of the node.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;

/// Loop iterations of the probe guest.
const PROBE_ITERATIONS: u32 = 1_000_000;
/// KVM is kept while it takes at most this many times TCG's time...
const KVM_TO_TCG_RATIO: u32 = 2;
/// ...plus this much, so that noise in two short runs does not decide.
const KVM_SLACK: Duration = Duration::from_millis(100);
/// A probe run that takes longer than this is given up.
const PROBE_LIMIT: Duration = Duration::from_secs(10);
/// The isa-debug-exit port the probe guest writes to.
const EXIT_PORT: u8 = 0xf4;

/// What the probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvmProbe {
    /// /dev/kvm runs guests at speed.
    Usable,
    /// No /dev/kvm, or it cannot be opened.
    Missing,
    /// /dev/kvm exists but runs the probe guest clearly slower than TCG.
    TooSlow,
}

impl KvmProbe {
    fn as_str(self) -> &'static str {
        match self {
            Self::Usable => "usable",
            Self::Missing => "missing",
            Self::TooSlow => "too-slow",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "usable" => Some(Self::Usable),
            "missing" => Some(Self::Missing),
            "too-slow" => Some(Self::TooSlow),
            _ => None,
        }
    }
}

/// The firmware image of the probe guest: the reset vector at 0xFFFF0 runs
/// `mov ecx, N; 1: dec ecx; jnz 1b; mov al, 0; out 0xf4, al; hlt`.
fn probe_firmware() -> Vec<u8> {
    let mut image = vec![0xf4u8; 64 * 1024];
    let mut code = vec![0x66, 0xb9];
    code.extend_from_slice(&PROBE_ITERATIONS.to_le_bytes());
    code.extend_from_slice(&[0x66, 0x49, 0x75, 0xfc, 0xb0, 0x00, 0xe6, EXIT_PORT, 0xf4]);
    let start = image.len() - 16;
    image[start..start + code.len()].copy_from_slice(&code);
    image
}

/// Probes KVM with `qemu`, reusing an answer cached in `cache_dir` for this boot.
pub async fn probe_kvm(qemu: &Path, cache_dir: &Path) -> KvmProbe {
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let cache = cache_dir.join("kvm-probe");
    if let Ok(text) = std::fs::read_to_string(&cache)
        && let Some((id, answer)) = text.trim().split_once(' ')
        && id == boot_id
        && let Some(answer) = KvmProbe::parse(answer)
    {
        return answer;
    }
    let mut answer = run_probe(qemu, cache_dir).await;
    if answer == KvmProbe::TooSlow {
        // One slow start of QEMU under load must not put the node on TCG until reboot.
        answer = run_probe(qemu, cache_dir).await;
    }
    tracing::info!(kvm = answer.as_str(), "probed /dev/kvm");
    if answer != KvmProbe::Missing && std::fs::create_dir_all(cache_dir).is_ok() {
        let _ = std::fs::write(&cache, format!("{boot_id} {}\n", answer.as_str()));
    }
    answer
}

async fn run_probe(qemu: &Path, scratch: &Path) -> KvmProbe {
    if std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_err()
    {
        return KvmProbe::Missing;
    }
    let firmware: PathBuf = scratch.join(format!("kvm-probe-{}.bin", std::process::id()));
    if std::fs::create_dir_all(scratch).is_err()
        || std::fs::write(&firmware, probe_firmware()).is_err()
    {
        return KvmProbe::Missing;
    }
    let kvm = time_probe_guest(qemu, &firmware, "kvm").await;
    let tcg = time_probe_guest(qemu, &firmware, "tcg").await;
    let _ = std::fs::remove_file(&firmware);
    tracing::debug!(?kvm, ?tcg, "KVM probe");
    judge(kvm, tcg)
}

/// What the two timings say. A KVM run that failed means no KVM; a TCG run that failed
/// leaves KVM as the only choice.
fn judge(kvm: ProbeRun, tcg: ProbeRun) -> KvmProbe {
    match (kvm, tcg) {
        (ProbeRun::Failed, _) => KvmProbe::Missing,
        (ProbeRun::TimedOut, _) => KvmProbe::TooSlow,
        (ProbeRun::Finished(_), ProbeRun::Failed | ProbeRun::TimedOut) => KvmProbe::Usable,
        (ProbeRun::Finished(kvm), ProbeRun::Finished(tcg)) => {
            if kvm <= tcg * KVM_TO_TCG_RATIO + KVM_SLACK {
                KvmProbe::Usable
            } else {
                KvmProbe::TooSlow
            }
        }
    }
}

/// How one run of the probe guest went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProbeRun {
    Finished(Duration),
    TimedOut,
    Failed,
}

async fn time_probe_guest(qemu: &Path, firmware: &Path, accel: &str) -> ProbeRun {
    let started = Instant::now();
    let child = Command::new(qemu)
        .args([
            "-accel",
            accel,
            "-M",
            "pc",
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-m",
            "16",
        ])
        .arg("-bios")
        .arg(firmware)
        .args([
            "-device",
            &format!("isa-debug-exit,iobase={EXIT_PORT:#x},iosize=1"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let Ok(mut child) = child else {
        return ProbeRun::Failed;
    };
    match tokio::time::timeout(PROBE_LIMIT, child.wait()).await {
        // isa-debug-exit makes QEMU exit with (value << 1) | 1 = 1.
        Ok(Ok(status)) if status.code() == Some(1) => ProbeRun::Finished(started.elapsed()),
        Ok(_) => ProbeRun::Failed,
        Err(_) => {
            let _ = child.kill().await;
            ProbeRun::TimedOut
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_code_sits_at_the_reset_vector() {
        let image = probe_firmware();
        assert_eq!(image.len(), 65536);
        assert_eq!(&image[0xfff0..0xfff2], &[0x66, 0xb9]);
        assert_eq!(image[0xfff0 + 14], 0xf4);
    }

    #[test]
    fn kvm_is_kept_unless_clearly_slower_than_tcg() {
        let ms = |n| ProbeRun::Finished(Duration::from_millis(n));
        // This machine: nested KVM emulating real mode.
        assert_eq!(judge(ms(600), ms(50)), KvmProbe::TooSlow);
        // The same under load: both slow down, the verdict stands.
        assert_eq!(judge(ms(1800), ms(150)), KvmProbe::TooSlow);
        // A working host, and one whose KVM run happened to start slowly.
        assert_eq!(judge(ms(40), ms(45)), KvmProbe::Usable);
        assert_eq!(judge(ms(180), ms(45)), KvmProbe::Usable);
        assert_eq!(judge(ProbeRun::TimedOut, ms(45)), KvmProbe::TooSlow);
        assert_eq!(judge(ProbeRun::Failed, ms(45)), KvmProbe::Missing);
        assert_eq!(judge(ms(40), ProbeRun::Failed), KvmProbe::Usable);
    }
}
