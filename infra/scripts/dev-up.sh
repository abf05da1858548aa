#!/usr/bin/env bash
# Bring up a local NATS, two workers serving the demo model and a gateway on :8080. Ctrl-C stops all.
set -euo pipefail
cd "$(dirname "$0")/../.."
trap 'kill 0' EXIT
nats-server -c infra/nats/single.conf &
sleep 0.5
apps/cli/bin/cohort.js worker --nats nats://127.0.0.1:4222 --model demo --threads 1 &
apps/cli/bin/cohort.js worker --nats nats://127.0.0.1:4222 --model demo --threads 1 &
apps/cli/bin/cohort.js gateway --nats nats://127.0.0.1:4222 --port "${PORT:-8080}" &
wait
