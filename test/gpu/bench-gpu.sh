#!/usr/bin/env bash
# One prepared benchmark run for the lent GPU machine (see test/gpu/README.md):
#   `cohort bench` (offline ORT curve vs served) and `cohort bench policies --models demo`, both
#   with --ep $EP (default webgpu), results (text, JSON, SVG) under $OUT.
# Here, without a GPU: EP=cpu bash test/gpu/bench-gpu.sh --quick   (skips the GPU-only setup).
#
# Env: EP (webgpu | cpu | cuda; default webgpu), OUT (default: a new temp dir),
#      POLICIES (policy configs of the policies bench; default: all of cohort bench policies),
#      CARRY (folder of the carried files; default .cache/gpu).
set -euo pipefail
cd "$(dirname "$0")/../.."

EP=${EP:-webgpu}
OUT=${OUT:-$(mktemp -d /tmp/cohort-gpu-bench.XXXXXX)}
CARRY=${CARRY:-.cache/gpu}
QUICK=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    *) echo "usage: [EP=webgpu|cpu] [OUT=DIR] [POLICIES=LIST] bash test/gpu/bench-gpu.sh [--quick]" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
log() { echo "bench-gpu: $*" | tee -a "$OUT/steps.log" >&2; }

if [ "$EP" != cpu ]; then
  # GPU-only setup: the carried Node binary and node_modules, Debian's Vulkan loader, the
  # NVIDIA Vulkan ICD of the machine (Dawn's Vulkan backend drives the WebGPU EP).
  if [ -f "$CARRY/node.tar.xz" ]; then
    mkdir -p /tmp/cohort-node && tar xJf "$CARRY/node.tar.xz" -C /tmp/cohort-node
    export PATH="/tmp/cohort-node:$PATH"
  fi
  if [ -f "$CARRY/node_modules.tar.xz" ] && [ ! -e node_modules/onnxruntime-node ]; then
    tar xJf "$CARRY/node_modules.tar.xz"
  fi
  for f in "$CARRY"/*.deb .gl/*.deb; do
    if [ -f "$f" ]; then dpkg -x "$f" /; fi
  done
  ldconfig
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
  if [ ! -f "$VK_DRIVER_FILES" ]; then log "warning: no Vulkan ICD at $VK_DRIVER_FILES"; fi
  (nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>&1 || true) | tee "$OUT/nvidia-smi.txt" >&2
fi

command -v node >/dev/null || { log "no node on PATH (carry $CARRY/node.tar.xz, see test/gpu/README.md)"; exit 1; }
[ -e node_modules/onnxruntime-node ] || { log "no node_modules (carry $CARRY/node_modules.tar.xz)"; exit 1; }
log "EP=$EP node $(node --version), $(nproc) cores, wrk: $(command -v wrk || echo none), nats-server: $(command -v nats-server || echo none), OUT=$OUT"

cohort() { node apps/cli/bin/cohort.js "$@"; }
MODES=embedded
if command -v nats-server >/dev/null; then MODES=nats,embedded; fi
BENCH_FLAGS=(--ep "$EP" --modes "$MODES" --out "$OUT/bench.json")
POLICY_FLAGS=(--models demo --ep "$EP" --svg-dir "$OUT" --out "$OUT/policies.json")
if [ "$QUICK" = 1 ]; then
  BENCH_FLAGS+=(--duration 2 --offline-seconds 0.3 --low-seconds 2 --floor-requests 50)
  POLICY_FLAGS+=(--quick)
fi
if [ -n "${POLICIES:-}" ]; then POLICY_FLAGS+=(--policies "$POLICIES"); fi

rc=0
log "cohort bench ${BENCH_FLAGS[*]}"
cohort bench "${BENCH_FLAGS[@]}" > "$OUT/bench.txt" 2> "$OUT/bench.err" || { rc=$?; log "cohort bench failed ($rc)"; tail -20 "$OUT/bench.err" >&2; }
cat "$OUT/bench.txt"
log "cohort bench policies ${POLICY_FLAGS[*]}"
cohort bench policies "${POLICY_FLAGS[@]}" > "$OUT/policies.txt" 2> "$OUT/policies.err" || { rc=$?; log "cohort bench policies failed ($rc)"; tail -20 "$OUT/policies.err" >&2; }
cat "$OUT/policies.txt"
log "done (rc $rc); results in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $rc
