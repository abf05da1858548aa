#!/usr/bin/env bash
# Prepare the files test/gpu/bench-gpu.sh needs on the GPU machine (run here, once):
#   $DEST/node.tar.xz          this machine's node binary (xz: ~95 MB -> ~25 MB)
#   $DEST/node_modules.tar.xz  the runtime node_modules: linux-x64 onnxruntime only, no dev tools
#   $DEST/*.deb                Debian's libvulkan1 (amd64), plus nats-server when available
# DEST defaults to .cache/gpu (git-ignored); pass it to `run` as carry: [".cache/gpu"].
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-.cache/gpu}
mkdir -p "$DEST"
tar cJf "$DEST/node.tar.xz" -C "$(dirname "$(readlink -f "$(command -v node)")")" node
tar cJf "$DEST/node_modules.tar.xz" \
  --exclude='node_modules/onnxruntime-node/bin/napi-v6/darwin' \
  --exclude='node_modules/onnxruntime-node/bin/napi-v6/win32' \
  --exclude='node_modules/onnxruntime-node/bin/napi-v6/linux/arm64' \
  --exclude='node_modules/typescript' --exclude='node_modules/playwright-core' \
  --exclude='node_modules/vitest' --exclude='node_modules/@vitest' --exclude='node_modules/vite' \
  --exclude='node_modules/rollup' --exclude='node_modules/@rollup' --exclude='node_modules/fast-check' \
  --exclude='node_modules/.cache' \
  node_modules
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
mkdir -p /tmp/amd64/partial
# shellcheck disable=SC2086
apt-get $o update >/dev/null
# shellcheck disable=SC2086
(cd "$DEST" && apt-get $o download libvulkan1 && (apt-get $o download nats-server || echo "pack: no nats-server deb; the GPU run uses the embedded mode"))
du -sh "$DEST"/*
echo "pack: total $(du -sm "$DEST" | cut -f1) MiB (the carry limit is 64 MiB)"
