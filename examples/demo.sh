#!/usr/bin/env bash
# Ferrovirt's main job on the single-machine default: start `ferrovirt up` (unless it runs),
# serve a guest disk image over HTTP on loopback, apply an upstream-style VirtualMachine whose
# dataVolumeTemplate imports it, follow the VM through Provisioning to Running, and show its
# serial console up to the login prompt.
#
#   examples/demo.sh [IMAGE]
#
# Without IMAGE, the fast test guest (Debian's kernel and a busybox initramfs, ~3 s to build
# with fixtures/guests.sh) is the disk, as a compressed qcow2. Packages it needs (QEMU,
# firmware, the guest's build tools) are installed by scripts/install-deps when missing.
#
# Environment: FERROVIRT (the binary; target/release/ferrovirt), FERROVIRT_DATA_DIR
# (/tmp/ferrovirt), FERROVIRT_LISTEN (the API server's address; 127.0.0.1:6443),
# DEMO_TIMEOUT (seconds; 300). The platform and the VM are left running:
# `ferrovirt console demo` attaches, `ferrovirt stop demo` stops it, `ferrovirt down` ends all.
set -euo pipefail

cd "$(dirname "$0")/.."
ferrovirt=${FERROVIRT:-target/release/ferrovirt}
data_dir=${FERROVIRT_DATA_DIR:-/tmp/ferrovirt}
listen=${FERROVIRT_LISTEN:-127.0.0.1:6443}
timeout=${DEMO_TIMEOUT:-300}
work=$(mktemp -d)
server="" console="" started=""
# A demo that fails leaves nothing running: what it started (the platform included) stops.
cleanup() {
  local status=$?
  [[ -n $server$console ]] && kill $server $console 2>/dev/null
  rm -rf "$work"
  if [[ $status -ne 0 && -n $started ]]; then
    echo "demo: failed; stopping the platform it started ($ferrovirt down --data-dir $data_dir)" >&2
    "$ferrovirt" down --data-dir "$data_dir" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

[[ -x $ferrovirt ]] || { echo "demo: no $ferrovirt; run cargo build --release first" >&2; exit 1; }
if ! command -v qemu-system-x86_64 >/dev/null || ! command -v busybox >/dev/null; then
  echo "demo: installing QEMU and the test guest's tools (scripts/install-deps)"
  scripts/install-deps
fi
if [[ $# -gt 0 ]]; then
  image=$1
  [[ -f $image ]] || { echo "demo: no image $image" >&2; exit 1; }
else
  bash fixtures/guests.sh target/guests fast >/dev/null
  image=$work/guest.qcow2
  qemu-img convert -c -O qcow2 target/guests/fast/disk.img "$image"
fi

export KUBECONFIG=$data_dir/kubeconfig
if [[ -f $data_dir/ferrovirt.pid ]] && kill -0 "$(cat "$data_dir/ferrovirt.pid")" 2>/dev/null; then
  echo "ferrovirt is already up on $data_dir"
else
  "$ferrovirt" up --data-dir "$data_dir" --listen "$listen"
  started=1
fi

# A real HTTP server (Range, ETag) on a free loopback port, serving the image's directory.
python3 fixtures/httpserver.py --root "$(dirname "$image")" --port-file "$work/port" --quiet &
server=$!
for _ in $(seq 100); do [[ -f $work/port ]] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$work/port")/$(basename "$image")"

kubectl delete vm demo --ignore-not-found --wait=true >/dev/null
kubectl apply -f - <<YAML
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: demo
spec:
  runStrategy: Always
  dataVolumeTemplates:
  - metadata:
      name: demo-root
    spec:
      source:
        http:
          url: "$url"
      storage:
        resources:
          requests:
            storage: 1Gi
  template:
    spec:
      domain:
        resources:
          requests:
            memory: 256Mi
        devices:
          disks:
          - name: root
            disk:
              bus: virtio
      volumes:
      - name: root
        dataVolume:
          name: demo-root
YAML

# Follow the VM as `kubectl get vm,dv -w` would, until it runs.
last=""
running=""
for _ in $(seq $((timeout * 2))); do
  state=$(kubectl get vm demo -o jsonpath='{.status.printableStatus}')
  dv=$(kubectl get datavolume demo-root -o jsonpath='{.status.phase} {.status.progress}' 2>/dev/null || true)
  line="virtualmachine/demo: ${state:-<none>}   datavolume/demo-root: ${dv:-<none>}"
  if [[ $line != "$last" ]]; then
    echo "$line"
    last=$line
  fi
  case $state in
    Running) running=1; break ;;
    DataVolumeError|ErrorPvcNotFound|ErrorUnschedulable|CrashLoopBackOff)
      kubectl get vm demo -o jsonpath='{range .status.conditions[*]}{.type}: {.reason} {.message}{"\n"}{end}' >&2
      exit 1
      ;;
  esac
  sleep 0.5
done
[[ -n $running ]] || { echo "demo: vm/demo did not run within ${timeout}s (see $data_dir/ferrovirt.log)" >&2; exit 1; }
kubectl get vm,vmi,datavolume,pod

# The serial console, as `ferrovirt console demo` shows it, until the login prompt.
"$ferrovirt" console demo --timeout 30 </dev/null >"$work/console" 2>&1 &
console=$!
for _ in $(seq $((timeout * 2))); do
  grep -q "login:" "$work/console" && break
  sleep 0.5
done
echo "--- serial console of vm/demo ---"
tail -n 8 "$work/console" | tr -d '\r'
echo
echo "---"
grep -q "login:" "$work/console" || { echo "demo: no login prompt within ${timeout}s" >&2; exit 1; }
echo "vm/demo runs: '$ferrovirt console demo' attaches (Ctrl+] leaves), '$ferrovirt stop demo' stops it."
