#!/usr/bin/env bash
# The production install every container image performs (docker/Dockerfile runs exactly this), runnable
# on any clone: `scripts/prod-install.sh ROLE [SBOM_FILE]`, ROLE one of
#   gateway  runtime dependencies only, without onnxruntime-node (the gateway never loads it: ONNX
#            Runtime runs only in the worker's threads and child processes);
#   cpu      runtime dependencies, onnxruntime-node with the CPU binaries of this platform only (the
#            npm package carries linux, darwin and win32 builds: about 290 MB, 45 MB of them linux/x64);
#   cuda     as cpu, plus the CUDA 12 execution provider from onnxruntime-node's own installer
#            (ONNXRUNTIME_NODE_INSTALL=cuda12: downloads from NuGet, so the build needs api.nuget.org).
# Steps: `npm ci --omit=dev --ignore-scripts` (no dev dependency, no install script: every runtime
# dependency works without its script; package.json's allowScripts says why for each), then
# `npm audit --omit=dev --audit-level=high` (COHORT_AUDIT=skip to skip it, e.g. where the registry's
# audit endpoint is unreachable; the image build keeps it on), then the pruning of ROLE, then the
# CycloneDX SBOM of what is left in node_modules (scripts/sbom.mjs) to SBOM_FILE (default ./sbom.cdx.json).
set -euo pipefail
role="${1:?usage: scripts/prod-install.sh gateway|cpu|cuda [SBOM_FILE]}"
sbom="${2:-sbom.cdx.json}"
case "$role" in gateway | cpu | cuda) ;; *) echo "prod-install: unknown role \"$role\" (gateway, cpu or cuda)" >&2; exit 2 ;; esac

npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=warn

if [ "${COHORT_AUDIT:-high}" != skip ]; then
  # Fails (exit 1) on a known high or critical advisory in a runtime dependency, and on an audit
  # endpoint that cannot be reached: an unchecked image is not a checked one.
  npm audit --omit=dev --audit-level="${COHORT_AUDIT:-high}"
fi

ort=node_modules/onnxruntime-node
if [ "$role" = gateway ]; then
  rm -rf "$ort"
else
  os="$(node -p process.platform)" arch="$(node -p process.arch)" platform="$os/$arch"
  for d in "$ort"/bin/napi-v6/*; do
    [ "$d" = "$ort/bin/napi-v6/$os" ] || rm -rf "$d"
  done
  for d in "$ort/bin/napi-v6/$os"/*; do
    [ "$d" = "$ort/bin/napi-v6/$platform" ] || rm -rf "$d"
  done
  if [ "$role" = cuda ]; then
    (cd "$ort" && ONNXRUNTIME_NODE_INSTALL=cuda12 node script/install.js)
    test -f "$ort/bin/napi-v6/$platform/libonnxruntime_providers_cuda.so"
  fi
fi
node scripts/sbom.mjs "$sbom"
echo "prod-install: $role install done ($(du -sh node_modules | cut -f1) in node_modules; SBOM in $sbom)"
