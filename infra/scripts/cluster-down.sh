#!/usr/bin/env bash
# Stop the nodes that cluster-up.sh started (by their pid files: SIGTERM to all, SIGKILL after 10 s).
#   cluster-down.sh           stop; keep the JetStream stores, logs and passwords
#   cluster-down.sh --clean   stop and remove $COHORT_NATS_STATE_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=cluster-env.sh
source "$here/cluster-env.sh"
pids=()
for pidfile in "$COHORT_NATS_STATE_DIR"/node-*.pid; do
  [ -f "$pidfile" ] || continue
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    pids+=("$pid")
  fi
  rm -f "$pidfile"
done
# All nodes stop together (one after the other, each would wait for the others' routes).
for _ in $(seq 1 100); do
  alive=0
  for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then alive=1; fi
  done
  [ "$alive" = 0 ] && break
  sleep 0.1
done
for pid in "${pids[@]}"; do
  kill -KILL "$pid" 2>/dev/null || true
done
if [ "${1:-}" = "--clean" ]; then
  rm -rf "$COHORT_NATS_STATE_DIR"
fi
echo "cluster-down: stopped"
