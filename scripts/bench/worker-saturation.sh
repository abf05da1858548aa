#!/usr/bin/env bash
# The worker at saturation, counted (issue 28; docs/bench/saturation-2026-12-06.md): nats-server, one
# cohort worker alone on the last core (taskset) serving the heavy benchmark MLP (--threads 1; `npm
# run bench -- --model heavy` builds it into .cache/models), cohort gateway and wrk on core 0; wrk
# -c512 sends the binary tensor extension (one row of 512 FP32). After a 3 s warm-up, SECONDS of
# saturation: items/s, the worker's CPU per item (all threads, and its main thread alone, from
# /proc), the gateway's CPU per item, the NATS messages it published and received per item (nats-server's /connz), and the
# self-tuned batch cap's changes from the worker's log.
#   scripts/bench/worker-saturation.sh [--seconds 6] [CHECKOUT]
set -euo pipefail
SECS=6 root=''
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECS=$2; shift 2 ;;
    *) root="$(cd "$1" && pwd)"; shift ;;
  esac
done
here="$(cd "$(dirname "$0")/../.." && pwd)"
root=${root:-$here}
export PATH="$HOME/.cache/cohort-ci/bin:$PATH"
MODEL="$here/.cache/models/heavy-mlp-512-2560-2560-2560-16.onnx"
[ -f "$MODEL" ] || { echo "worker-saturation: $MODEL is missing: run npm run bench -- --model heavy once" >&2; exit 2; }
last=$(( $(nproc) - 1 ))
D=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$D"' EXIT
python3 - "$D/body.lua" <<'PY'
import json, random, struct, sys
random.seed(1)
head = json.dumps({'inputs': [{'name': 'input', 'datatype': 'FP32', 'shape': [1, 512], 'parameters': {'binary_data_size': 2048}}]}, separators=(',', ':')).encode()
body = head + struct.pack('<512f', *[random.random() for _ in range(512)])
esc = ''.join('\\%d' % b for b in body)
open(sys.argv[1], 'w').write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/octet-stream"\n'
  f'wrk.headers["Inference-Header-Content-Length"] = "{len(head)}"\nwrk.body = "{esc}"\n')
PY
port=$((20000 + RANDOM % 20000)); mport=$((port + 1))
nats-server -a 127.0.0.1 -p $port -m $mport > "$D/nats.log" 2>&1 & nats=$!
sleep 0.5
taskset -c $last "$root/apps/cli/bin/cohort.js" worker --nats nats://127.0.0.1:$port --model m="$MODEL" --threads 1 > "$D/worker.log" 2>&1 & worker=$!
for _ in $(seq 200); do grep -q serving "$D/worker.log" && break; sleep 0.3; done
taskset -c 0 "$root/apps/cli/bin/cohort.js" gateway --nats nats://127.0.0.1:$port --port 0 --drain-ms 0 > "$D/gw.log" 2>&1 & gw=$!
for _ in $(seq 200); do grep -q 'gateway on' "$D/gw.log" && break; sleep 0.3; done
url=$(grep -o 'gateway on http://[^ ]*' "$D/gw.log" | head -1 | sed 's/gateway on //')
taskset -c 0 wrk -t1 -c512 -d3s -s "$D/body.lua" "$url/v2/models/m/infer" > /dev/null
conn() { curl -s "http://127.0.0.1:$mport/connz" | python3 -c 'import json,sys; print(*["%d %d" % (c["in_msgs"], c["out_msgs"]) for c in json.load(sys.stdin)["connections"] if c.get("name") == "cohort-worker"])'; }
ticks() { awk '{print $14+$15}' "$1"; }
c0=$(conn); w0=$(ticks /proc/$worker/stat); m0=$(ticks /proc/$worker/task/$worker/stat); g0=$(ticks /proc/$gw/stat)
taskset -c 0 wrk -t1 -c512 -d${SECS}s -s "$D/body.lua" "$url/v2/models/m/infer" > "$D/wrk.txt"
c1=$(conn); w1=$(ticks /proc/$worker/stat); m1=$(ticks /proc/$worker/task/$worker/stat); g1=$(ticks /proc/$gw/stat)
n=$(grep -o '[0-9]* requests in' "$D/wrk.txt" | cut -d' ' -f1)
bad=$(grep -o 'Non-2xx or 3xx responses: [0-9]*' "$D/wrk.txt" | grep -o '[0-9]*$' || echo 0)
python3 - "$n" "$bad" "$SECS" "$c0" "$c1" "$w0" "$w1" "$m0" "$m1" "$(getconf CLK_TCK)" "$g0" "$g1" <<'PY'
import sys
n, bad, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
(p0, r0), (p1, r1) = (map(int, sys.argv[4].split()), map(int, sys.argv[5].split()))
w0, w1, m0, m1, hz, g0, g1 = map(int, sys.argv[6:13])
us = 1e6 / hz
print(f'{(n - bad) / secs:,.0f} items/s ({bad} non-2xx of {n}); worker CPU {(w1 - w0) * us / n:.1f} us/item '
      f'(main thread {(m1 - m0) * us / n:.1f}); gateway CPU {(g1 - g0) * us / n:.1f} us/item; NATS per item: published {(p1 - p0) / n:.3f}, received {(r1 - r0) / n:.3f}')
PY
echo "batch cap changes:"
grep '"batch cap changed"' "$D/worker.log" | python3 -c '
import json, sys
for l in sys.stdin:
    c = json.loads(l)
    print("  %s -> %s (%s; ms per item at from %s, at to %s)" % (c["from"], c["to"], c["reason"], c["msPerItemFrom"], c["msPerItemTo"]))'
kill -INT $gw; sleep 1; kill $worker $nats 2>/dev/null || true; wait $gw $worker $nats 2>/dev/null || true
