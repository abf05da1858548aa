#!/usr/bin/env bash
# Gateway CPU per request, checkouts side by side (issues 27 and 28; docs/bench/overload-2026-12-03.md,
# docs/benchmarks.md): for each checkout given (default: this one), nats-server + one cohort worker
# (the overload bench's deep model, --threads 1; `npm run bench -- overload --quick` builds it into
# .cache/models) + cohort gateway, then vegeta at RATE/s for SECONDS; gateway CPU from /proc over the
# flood, in all and per thread (main = the event loop; the others are V8's GC and compiler threads).
#   refusals (default): a 4 ms deadline, below the model's ~8 ms for one item alone, so the door
#     refuses every request (400 DEADLINE_TOO_SHORT, the step a 503 takes); then a bare node:http
#     server answering the same requests 503, the floor. RATE 2000.
#   --answers: no deadline, every request answered, each alone in its pack (open loop). RATE 250.
# Each checkout needs its own `npm ci`.
#   scripts/bench/gateway-cpu.sh [--answers] [--rate N] [--seconds 8] [CHECKOUT...]
set -euo pipefail
RATE='' SECS=8 MODE=refusals roots=()
while [ $# -gt 0 ]; do
  case "$1" in
    --answers) MODE=answers; shift ;;
    --rate) RATE=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    *) roots+=("$(cd "$1" && pwd)"); shift ;;
  esac
done
here="$(cd "$(dirname "$0")/../.." && pwd)"
[ ${#roots[@]} -gt 0 ] || roots=("$here")
if [ -z "$RATE" ]; then
  if [ $MODE = answers ]; then RATE=250; else RATE=2000; fi
fi
DEADLINE=4
[ $MODE = answers ] && DEADLINE=''
export PATH="$HOME/.cache/cohort-ci/bin:$PATH"
MODEL="$here/.cache/models/bench-deep-8x64-2560x4-2.onnx"
[ -f "$MODEL" ] || { echo "gateway-cpu: $MODEL is missing: run npm run bench -- overload --quick once" >&2; exit 2; }
D=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$D"' EXIT
python3 -c "
import json,random
random.seed(1)
print(json.dumps({'inputs':[{'name':'input','datatype':'FP32','shape':[1,512],'data':[round(random.random(),3) for _ in range(512)]}]}))" > "$D/body.json"
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
per_request() { echo $(( ($2 - $1) * 1000000 / $(getconf CLK_TCK) / (RATE * SECS) )); }
targets() {
  if [ -n "$2" ]; then
    printf 'POST %s/v2/models/deep/infer\nContent-Type: application/json\nX-Cohort-Timeout-Ms: %s\n@%s\n\n' "$1" "$2" "$D/body.json"
  else
    printf 'POST %s/v2/models/deep/infer\nContent-Type: application/json\n@%s\n\n' "$1" "$D/body.json"
  fi
}
threads() { for t in "/proc/$1/task/"*; do echo "$(basename "$t") $(awk '{print $14+$15}' "$t/stat")"; done | sort; }
echo "gateway-cpu: $MODE, $RATE/s for $SECS s${DEADLINE:+, $DEADLINE ms deadline}; load $(cut -d' ' -f1-3 /proc/loadavg)"
for root in "${roots[@]}"; do
  port=$((20000 + RANDOM % 20000))
  nats-server -a 127.0.0.1 -p $port > "$D/nats.log" 2>&1 & nats=$!
  sleep 0.5
  "$root/apps/cli/bin/cohort.js" worker --nats nats://127.0.0.1:$port --model deep="$MODEL" --threads 1 > "$D/worker.log" 2>&1 & worker=$!
  for _ in $(seq 200); do grep -q serving "$D/worker.log" && break; sleep 0.3; done
  "$root/apps/cli/bin/cohort.js" gateway --nats nats://127.0.0.1:$port --port 0 --drain-ms 0 > "$D/gw.log" 2>&1 & gw=$!
  for _ in $(seq 200); do grep -q 'gateway on' "$D/gw.log" && break; sleep 0.3; done
  url=$(grep -o 'gateway on http://[^ ]*' "$D/gw.log" | head -1 | sed 's/gateway on //')
  # Warm up with answers (the worker learns its time for one item alone), then the refusal flood.
  targets "$url" 1000 > "$D/warm"
  vegeta attack -targets "$D/warm" -rate 400 -duration 2s > /dev/null
  targets "$url" "$DEADLINE" > "$D/flood"
  threads $gw > "$D/th0"
  a=$(ticks $gw)
  vegeta attack -targets "$D/flood" -rate "$RATE" -duration "${SECS}s" > "$D/hits.bin"
  b=$(ticks $gw)
  threads $gw > "$D/th1"
  codes=$(vegeta report -type=json "$D/hits.bin" | python3 -c 'import json,sys;print(json.load(sys.stdin)["status_codes"])')
  split=$(join "$D/th0" "$D/th1" | awk -v main=$gw -v n=$((RATE * SECS)) -v hz="$(getconf CLK_TCK)" '{d=($3-$2)*1e6/hz/n; if ($1==main) m=d; else o+=d} END {printf "main thread %d us, other threads %d us", m, o}')
  echo "$(git -C "$root" rev-parse --short HEAD) ($root): $(per_request "$a" "$b") us of gateway CPU per request ($split), $codes"
  kill -INT $gw; sleep 1; kill $worker $nats 2>/dev/null || true; wait $gw $worker $nats 2>/dev/null || true
done
[ $MODE = refusals ] || exit 0
cat > "$D/bare.mjs" <<'JS'
import { createServer } from 'node:http'
const body = JSON.stringify({ error: 'the model is overloaded; retry later', code: 'OVERLOADED' })
const s = createServer((_req, res) => {
  res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1', 'content-length': Buffer.byteLength(body) })
  res.end(body)
})
s.listen(0, '127.0.0.1', () => console.log(`bare on http://127.0.0.1:${s.address().port}`))
JS
node "$D/bare.mjs" > "$D/bare.log" & bare=$!
for _ in $(seq 50); do grep -q 'bare on' "$D/bare.log" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$D/bare.log")
targets "$url" "$DEADLINE" > "$D/bare-flood"
vegeta attack -targets "$D/bare-flood" -rate 500 -duration 1s > /dev/null
a=$(ticks $bare)
vegeta attack -targets "$D/bare-flood" -rate "$RATE" -duration "${SECS}s" > /dev/null
b=$(ticks $bare)
echo "bare node:http 503: $(per_request "$a" "$b") us of CPU per request"
kill $bare
