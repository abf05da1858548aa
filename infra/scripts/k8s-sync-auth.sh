#!/usr/bin/env bash
# Copy infra/nats/auth.conf into the `auth.conf` key of the NATS ConfigMap (infra/k8s/nats.yaml).
# test/infra/k8s.test.ts fails while the two differ; run this after editing auth.conf.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="$(mktemp)"
awk -v auth=infra/nats/auth.conf '
  skipping && /^---/ { skipping = 0 }
  skipping { next }
  { print }
  /^  auth\.conf: \|$/ {
    while ((getline line < auth) > 0) { print (line == "" ? "" : "    " line) }
    skipping = 1
  }
' infra/k8s/nats.yaml >"$out"
mv "$out" infra/k8s/nats.yaml
echo "k8s-sync-auth: infra/k8s/nats.yaml now carries infra/nats/auth.conf"
