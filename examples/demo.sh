#!/usr/bin/env bash
# Ferrovirt's main job on the single-machine default: start `ferrovirt up` (unless it runs),
# serve a disk image over HTTP on loopback, apply an upstream-style DataVolume that imports
# it, and follow the DataVolume to Succeeded.
#
#   examples/demo.sh [IMAGE]
#
# Without IMAGE, a compressed qcow2 (64 MiB virtual, 8 MiB of data) is made with qemu-img.
#
# Environment: FERROVIRT (the binary; target/release/ferrovirt), FERROVIRT_DATA_DIR
# (/tmp/ferrovirt), FERROVIRT_LISTEN (the API server's address; 127.0.0.1:6443),
# DEMO_TIMEOUT (seconds; 300). The platform is left running: `ferrovirt down` stops it.
set -euo pipefail

cd "$(dirname "$0")/.."
ferrovirt=${FERROVIRT:-target/release/ferrovirt}
data_dir=${FERROVIRT_DATA_DIR:-/tmp/ferrovirt}
listen=${FERROVIRT_LISTEN:-127.0.0.1:6443}
timeout=${DEMO_TIMEOUT:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[[ -x $ferrovirt ]] || { echo "demo: no $ferrovirt; run cargo build --release first" >&2; exit 1; }
if [[ $# -gt 0 ]]; then
  image=$1
  [[ -f $image ]] || { echo "demo: no image $image" >&2; exit 1; }
else
  image=$work/demo.qcow2
  qemu-img create -q -f raw "$work/demo.raw" 64M
  qemu-io -f raw -c "write -P 0x5a 1M 4M" -c "write -P 0xa5 40M 4M" "$work/demo.raw" >/dev/null
  qemu-img convert -c -O qcow2 "$work/demo.raw" "$image"
  rm "$work/demo.raw"
fi

export KUBECONFIG=$data_dir/kubeconfig
if [[ -f $data_dir/ferrovirt.pid ]] && kill -0 "$(cat "$data_dir/ferrovirt.pid")" 2>/dev/null; then
  echo "ferrovirt is already up on $data_dir"
else
  "$ferrovirt" up --data-dir "$data_dir" --listen "$listen"
fi

# A real HTTP server (Range, ETag) on a free loopback port, serving the image's directory.
python3 fixtures/httpserver.py --root "$(dirname "$image")" --port-file "$work/port" --quiet &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [[ -f $work/port ]] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$work/port")/$(basename "$image")"

kubectl delete datavolume demo --ignore-not-found --wait=true >/dev/null
kubectl apply -f - <<YAML
apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: demo
spec:
  source:
    http:
      url: "$url"
  storage:
    resources:
      requests:
        storage: 1Gi
YAML

# Follow the DataVolume as `kubectl get dv -w` would, until it succeeds or fails.
last=""
for _ in $(seq $((timeout * 2))); do
  state=$(kubectl get datavolume demo -o jsonpath='{.status.phase} {.status.progress}')
  if [[ $state != "$last" ]]; then
    echo "datavolume/demo: $state"
    last=$state
  fi
  case $state in
    Succeeded*)
      kubectl get datavolume,pvc,pv
      exit 0
      ;;
    Failed*)
      kubectl get datavolume demo -o jsonpath='{range .status.conditions[*]}{.type}: {.reason} {.message}{"\n"}{end}' >&2
      exit 1
      ;;
  esac
  sleep 0.5
done
echo "demo: datavolume/demo did not succeed within ${timeout}s (see $data_dir/ferrovirt.log)" >&2
exit 1
