#!/usr/bin/env bash
# Check the local NATS cluster through each node's monitoring port: /healthz answers ok (server up,
# JetStream current), /routez shows a route to every other running node, and /jsz knows a JetStream
# meta leader. Exit 0 when every node in COHORT_NATS_NODES passes.
#   cluster-check.sh            check once, print one line per node
#   cluster-check.sh --wait S   retry for up to S seconds
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=cluster-env.sh
source "$here/cluster-env.sh"
wait_s=0
if [ "${1:-}" = "--wait" ]; then
  wait_s="${2:-30}"
fi
count=0
for i in $COHORT_NATS_NODES; do count=$((count + 1)); done

check_node() {
  local i="$1" base healthz routez jsz routes
  base="http://$COHORT_NATS_HOST:$((COHORT_NATS_PORT_BASE + 20 + i - 1))"
  healthz="$(curl -fsS -m 2 "$base/healthz" 2>/dev/null)" || { echo "node $i: /healthz not answering ok"; return 1; }
  routez="$(curl -fsS -m 2 "$base/routez" 2>/dev/null)" || { echo "node $i: /routez unreachable"; return 1; }
  routes="$(printf '%s' "$routez" | grep -o '"num_routes": *[0-9]*' | grep -o '[0-9]*$')"
  if [ "${routes:-0}" -lt $((count - 1)) ]; then
    echo "node $i: $routes route(s), want $((count - 1))"
    return 1
  fi
  jsz="$(curl -fsS -m 2 "$base/jsz" 2>/dev/null)" || { echo "node $i: /jsz unreachable"; return 1; }
  if ! printf '%s' "$jsz" | grep -q '"leader": *"[^"]'; then
    echo "node $i: no JetStream meta leader yet"
    return 1
  fi
  echo "node $i: ok ($healthz, $routes routes, $(printf '%s' "$jsz" | grep -o '"leader": *"[^"]*"' | head -1))"
}

deadline=$((SECONDS + wait_s))
while true; do
  out="" ok=1
  for i in $COHORT_NATS_NODES; do
    line="$(check_node "$i")" || ok=0
    out+="$line"$'\n'
  done
  if [ "$ok" = 1 ]; then
    printf '%s' "$out"
    exit 0
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    printf '%s' "$out" >&2
    exit 1
  fi
  sleep 0.5
done
