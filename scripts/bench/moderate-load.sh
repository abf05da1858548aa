#!/usr/bin/env bash
# `cohort serve` between idle and saturation, counted (issue 28; docs/bench/moderate-load-2026-12-07.md):
# the demo MLP (apps/cli's demo model, 256 -> 1024 -> 1024 -> 10, --threads 1) behind `cohort serve`,
# one JSON request of 256 floats. Per CHECKOUT (default: this one), side by side in rounds:
#   c=1    wrk -c1 --latency: p50, p99, requests/s, the process's CPU per request (/proc)
#   RATE   vegeta at RATE/s (constant rate): p50, p99, the process's CPU per request, its main
#          thread's alone, the mean batch and the share of batches run on the inline lane (/metrics)
# then the same rates against a bare node:http server (the floor: what any Node server pays per
# request at that rate on this machine). With --generators, the open-loop load generators' own
# cost and latency: vegeta and the Node one of `cohort bench peers` (bench/src/poisson.ts), each on
# core 0 against the bare server on core 1 at 3,000/s. With --gc RATE, this checkout's serve once
# more under node --trace-gc-nvp at RATE/s: the main thread's scavenges (count, mean and largest
# pause), the bytes they promoted to the old generation per request, and the full collections.
#   scripts/bench/moderate-load.sh [--seconds 4] [--rates "300 1500 3000"] [--rounds 2] [--generators] [--gc RATE] [CHECKOUT ...]
set -euo pipefail
SECS=4 RATES="300 1500 3000" ROUNDS=2 GENS=0 GC=0 roots=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECS=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --generators) GENS=1; shift ;;
    --gc) GC=$2; shift 2 ;;
    *) roots+=("$(cd "$1" && pwd)"); shift ;;
  esac
done
here="$(cd "$(dirname "$0")/../.." && pwd)"
[ ${#roots[@]} -gt 0 ] || roots=("$here")
export PATH="$HOME/.cache/cohort-ci/bin:$PATH"
for t in vegeta wrk; do command -v $t > /dev/null || { echo "moderate-load: $t is not on PATH (bash scripts/ci/install.sh vegeta; apt-get install wrk)" >&2; exit 2; }; done
MODEL="$here/.cache/models/demo-mlp-seed42.onnx"
[ -f "$MODEL" ] || { echo "moderate-load: $MODEL is missing: run npm start once (it builds the demo model)" >&2; exit 2; }
D=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$D"' EXIT
# The request: bench/src/bodies.ts's demoBody(), the one every bench sends.
(cd "$here" && node --import tsx -e "import('./bench/src/bodies.ts').then((m) => process.stdout.write(m.demoBody()))") > "$D/body.json"
printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nlocal f = io.open("%s/body.json"); wrk.body = f:read("*a"); f:close()\n' "$D" > "$D/post.lua"
# A bare node:http server on PORT (the floor), in the background.
FLOOR_JS="require('node:http').createServer((q,s)=>{q.resume();q.on('end',()=>{s.writeHead(200,{'content-type':'application/json'});s.end('{\"ok\":1}')})}).listen(Number(process.argv[1]),'127.0.0.1')"
ticks() { awk '{print $14+$15}' "$1"; }
HZ=$(getconf CLK_TCK)
# vegeta at a rate against URL: "p50 p99" in ms.
attack() {
  printf 'POST %s\nContent-Type: application/json\n@%s/body.json\n' "$1" "$D" > "$D/targets.txt"
  vegeta attack -targets="$D/targets.txt" -rate="$2" -duration="${3}s" -max-workers=4096 2>/dev/null | vegeta report -type=json |
    python3 -c 'import json,sys; l=json.load(sys.stdin)["latencies"]; print("%.2f %.1f" % (l["50th"]/1e6, l["99th"]/1e6))'
}
# "batches items inline-runs pool-runs" from a cohort /metrics.
counts() {
  curl -s "$1/metrics" | python3 -c '
import re, sys
m = {}
for l in sys.stdin:
    x = re.match(r"^(cohort_batch_size_(?:sum|count))\{model=\"demo\"\} (\S+)|^cohort_ort_runs_total\{instance=\"(\w+)\",model=\"demo\",result=\"ok\"\} (\S+)", l)
    if x and x.group(1): m[x.group(1)] = float(x.group(2))
    elif x: m["inline" if x.group(3) == "inline" else "pool"] = m.get("inline" if x.group(3) == "inline" else "pool", 0) + float(x.group(4))
print(int(m.get("cohort_batch_size_count", 0)), int(m.get("cohort_batch_size_sum", 0)), int(m.get("inline", 0)), int(m.get("pool", 0)))'
}
serve_round() {
  local root=$1 port=$((20000 + RANDOM % 20000))
  (cd "$root" && exec "$root/apps/cli/bin/cohort.js" serve --port $port --model demo="$MODEL" --threads 1 > "$D/serve.log" 2>&1) & local pid=$!
  local url=http://127.0.0.1:$port
  for _ in $(seq 200); do curl -sf "$url/v2/models/demo/ready" > /dev/null 2>&1 && break; sleep 0.3; done
  pid=$(pgrep -P $pid -f cohort.js || echo $pid)
  attack "$url/v2/models/demo/infer" 1000 2 > /dev/null
  wrk -t1 -c1 -d1s -s "$D/post.lua" "$url/v2/models/demo/infer" > /dev/null
  local p0 p1 line
  p0=$(ticks /proc/$pid/stat)
  wrk -t1 -c1 -d${SECS}s --latency -s "$D/post.lua" "$url/v2/models/demo/infer" > "$D/wrk.txt"
  p1=$(ticks /proc/$pid/stat)
  line=$(python3 - "$D/wrk.txt" $((p1 - p0)) "$HZ" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
ms = lambda s: float(s[:-2]) if s.endswith('ms') else float(s[:-2]) / 1000 if s.endswith('us') else float(s[:-1]) * 1000
p50 = ms(re.search(r'^\s+50%\s+(\S+)', t, re.M).group(1)); p99 = ms(re.search(r'^\s+99%\s+(\S+)', t, re.M).group(1))
n = int(re.search(r'(\d+) requests in', t).group(1))
rps = n / float(re.search(r'requests in ([\d.]+)s', t).group(1))
print(f'c=1 p50 {p50:.2f} p99 {p99:.2f} ms, {rps:,.0f}/s, CPU {int(sys.argv[2]) * 1e6 / int(sys.argv[3]) / n:,.0f} us/req')
PY
)
  echo "  $root: $line"
  for rate in $RATES; do
    local c0 c1 m0 m1 lat
    c0=$(counts "$url"); p0=$(ticks /proc/$pid/stat); m0=$(ticks /proc/$pid/task/$pid/stat)
    lat=$(attack "$url/v2/models/demo/infer" "$rate" "$SECS")
    c1=$(counts "$url"); p1=$(ticks /proc/$pid/stat); m1=$(ticks /proc/$pid/task/$pid/stat)
    python3 - "$rate" "$SECS" "$HZ" "$lat" "$c0" "$c1" $((p1 - p0)) $((m1 - m0)) <<'PY'
import sys
rate, secs, hz = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
p50, p99 = map(float, sys.argv[4].split())
b0, i0, l0, q0 = map(int, sys.argv[5].split()); b1, i1, l1, q1 = map(int, sys.argv[6].split())
n = rate * secs; us = 1e6 / hz
runs = (l1 - l0) + (q1 - q0)
print(f'    {rate:>6.0f}/s p50 {p50:.2f} p99 {p99:.1f} ms, CPU {int(sys.argv[7]) * us / n:,.0f} us/req (main thread {int(sys.argv[8]) * us / n:,.0f}), '
      f'mean batch {(i1 - i0) / max(1, b1 - b0):.2f}, inline {100 * (l1 - l0) / max(1, runs):.0f}% of runs')
PY
  done
  kill $pid 2>/dev/null || true; wait 2>/dev/null || true
}
floor_round() {
  local port=$((20000 + RANDOM % 20000))
  node -e "$FLOOR_JS" $port & local pid=$!
  sleep 0.5
  attack "http://127.0.0.1:$port/" 1000 1 > /dev/null
  local out="  floor (bare node:http):"
  for rate in $RATES; do
    local p0 p1 lat
    p0=$(ticks /proc/$pid/stat); lat=$(attack "http://127.0.0.1:$port/" "$rate" "$SECS"); p1=$(ticks /proc/$pid/stat)
    out="$out  $rate/s p50/p99 ${lat/ //} ms CPU $(python3 -c "print(round($((p1 - p0)) * 1e6 / $HZ / ($rate * $SECS)))") us/req"
  done
  echo "$out"
  kill $pid
}
generators() {
  local port=$((20000 + RANDOM % 20000)) g0 g1 lat
  taskset -c 1 node -e "$FLOOR_JS" $port & local pid=$!
  sleep 0.5
  echo "generators at 3,000/s for ${SECS} s (generator on core 0, bare node:http on core 1):"
  printf 'POST http://127.0.0.1:%s/\nContent-Type: application/json\n@%s/body.json\n' $port "$D" > "$D/targets.txt"
  taskset -c 0 vegeta attack -targets="$D/targets.txt" -rate=3000 -duration="${SECS}s" -max-workers=4096 > "$D/v.bin" 2>/dev/null &
  local v=$!; sleep 0.2; g0=$(ticks /proc/$v/stat); wait $v || true
  lat=$(vegeta report -type=json "$D/v.bin" | python3 -c 'import json,sys; l=json.load(sys.stdin)["latencies"]; print("p50 %.2f p99 %.2f ms" % (l["50th"]/1e6, l["99th"]/1e6))')
  echo "  vegeta: $lat (its CPU: see /usr/bin/time below)"
  /usr/bin/time -f '  vegeta CPU %U+%S s' taskset -c 0 vegeta attack -targets="$D/targets.txt" -rate=3000 -duration="${SECS}s" -max-workers=4096 2>&1 > /dev/null | grep CPU || true
  cat > "$D/gen.mts" <<EOF
import { runOpenLoop } from '$here/bench/src/poisson.ts'
import { readFileSync } from 'node:fs'
const body = readFileSync('$D/body.json', 'utf8')
const c0 = process.cpuUsage()
const r = await runOpenLoop({ url: 'http://127.0.0.1:$port/', body, rate: 3000, durationS: $SECS, seed: 1, maxSockets: 1024 })
const c = process.cpuUsage(c0)
const lat = r.latencyMs.slice().sort((a, b) => a - b)
const n = lat.length
console.log('  node (bench/src/poisson.ts, Poisson): p50 ' + lat[n >> 1].toFixed(2) + ' p99 ' + lat[Math.floor(n * 0.99)].toFixed(2) + ' ms (from the scheduled send), lag p99 ' + r.lagP99Ms.toFixed(2) + ' ms, CPU ' + ((c.user + c.system) / n).toFixed(0) + ' us/req')
EOF
  (cd "$here" && taskset -c 0 node --import tsx "$D/gen.mts")
  kill $pid
}
gc_run() {
  local port=$((20000 + RANDOM % 20000)) url flags
  flags=$(head -1 "$here/apps/cli/bin/cohort.js" | sed 's/.* node //')
  (cd "$here" && exec node $flags --trace-gc-nvp apps/cli/bin/cohort.js serve --port $port --model demo="$MODEL" --threads 1 > "$D/gc.log" 2>&1) &
  local pid=$!
  url=http://127.0.0.1:$port
  for _ in $(seq 200); do curl -sf "$url/v2/models/demo/ready" > /dev/null 2>&1 && break; sleep 0.3; done
  attack "$url/v2/models/demo/infer" 1000 3 > /dev/null
  local before lat
  before=$(grep -c 'gc=' "$D/gc.log" || true)
  lat=$(attack "$url/v2/models/demo/infer" "$GC" "$SECS")
  kill $pid; wait $pid 2>/dev/null || true
  tail -n +$((before + 1)) "$D/gc.log" | grep 'gc=' | python3 -c '
import collections, re, sys
rate, secs, lat = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3].split()
lines = [l for l in sys.stdin]
iso = collections.Counter(l.split("]")[0] for l in lines).most_common(1)[0][0]  # the main isolate: the most GCs
s = []; rates = []; full = 0; promoted = 0
for l in lines:
    if l.split("]")[0] != iso: continue
    d = dict(re.findall(r"(\w[\w.]*)=(\S+)", l))
    if d.get("gc") == "s": s.append(float(d["pause"])); promoted += int(d.get("promoted", 0)); rates.append(float(d.get("promotion_rate", "0%").rstrip("%")))
    else: full += 1
n = rate * secs
print(f"gc at {rate:.0f}/s for {secs:.0f} s (p50 {lat[0]} p99 {lat[1]} ms): {len(s)} scavenges, pause mean {sum(s)/max(1,len(s)):.2f} max {max(s, default=0):.2f} ms, "
      f"promoted {promoted / n / 1024:.2f} KB per request (of what survived the scavenge before, {sum(rates)/max(1,len(rates)):.0f}% on average); {full} other collections (mark-compact and its steps)")' "$GC" "$SECS" "$lat"
}
echo "moderate-load @ $(git -C "$here" rev-parse --short HEAD) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  echo "round $r"
  for root in "${roots[@]}"; do serve_round "$root"; done
  floor_round
done
[ $GENS = 1 ] && generators
[ "$GC" != 0 ] && gc_run
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
