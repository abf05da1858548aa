#!/usr/bin/env bash
# Start the local 3-node NATS cluster (infra/nats/cluster/node-{1,2,3}.conf): routes between the
# nodes, JetStream (replicas 3), websocket, users gateway/worker/admin. Settings: cluster-env.sh.
# Passwords: COHORT_NATS_{GATEWAY,WORKER,ADMIN}_PASS, generated when unset and written to
# $COHORT_NATS_STATE_DIR/credentials.env (mode 600). Waits until cluster-check.sh passes.
#   infra/scripts/cluster-up.sh && source /tmp/cohort-nats-cluster/cluster.env
#   COHORT_NATS_PASS=$COHORT_NATS_WORKER_PASS npx cohort worker --nats "$COHORT_NATS_URLS" \
#     --nats-user worker --kv-replicas 3 --model demo
#   infra/scripts/cluster-down.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=cluster-env.sh
source "$here/cluster-env.sh"
command -v nats-server >/dev/null || { echo "cluster-up: nats-server is not on PATH (apt-get install nats-server)" >&2; exit 1; }
mkdir -p "$COHORT_NATS_STATE_DIR"
chmod 700 "$COHORT_NATS_STATE_DIR"

creds="$COHORT_NATS_STATE_DIR/credentials.env"
if [ -f "$creds" ]; then
  # shellcheck disable=SC1090
  source "$creds"
fi
gen() { head -c 18 /dev/urandom | base64 | tr -d '/+=' ; }
export COHORT_NATS_GATEWAY_PASS="${COHORT_NATS_GATEWAY_PASS:-gw-$(gen)}"
export COHORT_NATS_WORKER_PASS="${COHORT_NATS_WORKER_PASS:-wk-$(gen)}"
export COHORT_NATS_ADMIN_PASS="${COHORT_NATS_ADMIN_PASS:-ad-$(gen)}"
umask 077
printf 'COHORT_NATS_GATEWAY_PASS=%q\nCOHORT_NATS_WORKER_PASS=%q\nCOHORT_NATS_ADMIN_PASS=%q\n' \
  "$COHORT_NATS_GATEWAY_PASS" "$COHORT_NATS_WORKER_PASS" "$COHORT_NATS_ADMIN_PASS" >"$creds"
umask 022

cluster_export_node_vars
{
  printf 'export COHORT_NATS_STATE_DIR=%q COHORT_NATS_HOST=%q COHORT_NATS_PORT_BASE=%q COHORT_NATS_NODES=%q\n' \
    "$COHORT_NATS_STATE_DIR" "$COHORT_NATS_HOST" "$COHORT_NATS_PORT_BASE" "$COHORT_NATS_NODES"
  printf 'export COHORT_NATS_URLS=%q\n' "$(cluster_urls)"
  sed 's/^/export /' "$creds"
} >"$COHORT_NATS_STATE_DIR/cluster.env"

for i in $COHORT_NATS_NODES; do
  pidfile="$COHORT_NATS_STATE_DIR/node-$i.pid"
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "cluster-up: node $i already runs (pid $(cat "$pidfile"))"
    continue
  fi
  mkdir -p "$COHORT_NATS_STATE_DIR/node-$i/js"
  nats-server -c "$CLUSTER_CONF_DIR/node-$i.conf" -P "$pidfile" -l "$COHORT_NATS_STATE_DIR/node-$i.log" </dev/null >/dev/null 2>&1 &
  echo "$!" >"$pidfile"
done

if ! "$here/cluster-check.sh" --wait "${COHORT_NATS_UP_TIMEOUT_S:-30}"; then
  echo "cluster-up: the cluster did not become healthy; logs in $COHORT_NATS_STATE_DIR/node-*.log" >&2
  exit 1
fi
echo "cluster-up: NATS cluster up: $(cluster_urls) (source $COHORT_NATS_STATE_DIR/cluster.env)"
