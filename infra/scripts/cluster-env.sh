# Sourced by cluster-{up,check,down}.sh: the settings of the local 3-node NATS cluster.
#   COHORT_NATS_STATE_DIR  state (pid files, logs, JetStream stores, cluster.env)  /tmp/cohort-nats-cluster
#   COHORT_NATS_HOST       address every node listens on                           127.0.0.1
#   COHORT_NATS_PORT_BASE  node i (1..3) uses BASE+i-1 for clients, +10 routes,
#                          +20 monitoring (/healthz), +30 websocket                 14222
#   COHORT_NATS_NODES      which nodes to start (a subset keeps the routes to all)   "1 2 3"
COHORT_NATS_STATE_DIR="${COHORT_NATS_STATE_DIR:-/tmp/cohort-nats-cluster}"
COHORT_NATS_HOST="${COHORT_NATS_HOST:-127.0.0.1}"
COHORT_NATS_PORT_BASE="${COHORT_NATS_PORT_BASE:-14222}"
COHORT_NATS_NODES="${COHORT_NATS_NODES:-1 2 3}"
CLUSTER_CONF_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../nats/cluster" && pwd)"

# Export the variables that infra/nats/cluster/node-N.conf reads.
cluster_export_node_vars() {
  local i routes=""
  for i in 1 2 3; do
    export "COHORT_NATS_N${i}_HOST=$COHORT_NATS_HOST"
    export "COHORT_NATS_N${i}_PORT=$((COHORT_NATS_PORT_BASE + i - 1))"
    export "COHORT_NATS_N${i}_CLUSTER_PORT=$((COHORT_NATS_PORT_BASE + 10 + i - 1))"
    export "COHORT_NATS_N${i}_HTTP_PORT=$((COHORT_NATS_PORT_BASE + 20 + i - 1))"
    export "COHORT_NATS_N${i}_WS_PORT=$((COHORT_NATS_PORT_BASE + 30 + i - 1))"
    export "COHORT_NATS_N${i}_STORE_DIR=$COHORT_NATS_STATE_DIR/node-$i/js"
    routes+="${routes:+, }\"nats-route://$COHORT_NATS_HOST:$((COHORT_NATS_PORT_BASE + 10 + i - 1))\""
  done
  export COHORT_NATS_ROUTES="[$routes]"
}

# nats://host:port of the given nodes, comma-separated (what --nats takes).
cluster_urls() {
  local i out=""
  for i in $COHORT_NATS_NODES; do
    out+="${out:+,}nats://$COHORT_NATS_HOST:$((COHORT_NATS_PORT_BASE + i - 1))"
  done
  echo "$out"
}
