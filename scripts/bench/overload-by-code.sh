#!/bin/bash
# By-hand overload probe (issue 27, docs/bench/overload-2026-12-02-by-code.md): nats-server + one
# cohort worker (the bench's deep model, --threads 1; run `npm run bench -- overload` once to build
# it into .cache/models) + cohort gateway on :18090, vegeta from the CI cache. Files in /tmp/why.
set -u
mkdir -p /tmp/why
python3 -c "
import json,random
random.seed(1)
print(json.dumps({'inputs':[{'name':'input','datatype':'FP32','shape':[1,512],'data':[round(random.random(),3) for _ in range(512)]}]}))" > /tmp/why/body.json
for d in 250 2; do printf 'POST http://127.0.0.1:18090/v2/models/deep/infer\nContent-Type: application/json\nX-Cohort-Timeout-Ms: %s\n@/tmp/why/body.json\n' $d > /tmp/why/t$d.txt; done
cp /tmp/why/t250.txt /tmp/why/t.txt; cp /tmp/why/t2.txt /tmp/why/t2.txt 2>/dev/null || true
here="$(cd "$(dirname "$0")" && pwd)"; cd "$here/../.."
nats-server -a 127.0.0.1 -p 14299 -js -sd /tmp/why/js > /tmp/why/nats.log 2>&1 & NP=$!
sleep 0.5
node apps/cli/bin/cohort.js worker --nats nats://127.0.0.1:14299 --model deep=.cache/models/bench-deep-8x64-2560x4-2.onnx --threads 1 > /tmp/why/worker.log 2>&1 & WP=$!
node apps/cli/bin/cohort.js gateway --nats nats://127.0.0.1:14299 --port 18090 --drain-ms 0 > /tmp/why/gw.log 2>&1 & GP=$!
for i in $(seq 1 60); do curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' --data @/tmp/why/body.json http://127.0.0.1:18090/v2/models/deep/infer 2>/dev/null | grep -q 200 && break; sleep 0.5; done
V=~/.cache/cohort-ci/bin/vegeta
$V attack -targets=/tmp/why/t.txt -rate=300/s -duration=3s -timeout=10s -max-workers=4096 > /dev/null
$V attack -targets=/tmp/why/t.txt -rate=${RATE:-1000}/s -duration=6s -timeout=10s -max-workers=4096 -output=/tmp/why/a.bin
$V encode --to json /tmp/why/a.bin > /tmp/why/a.json
kill $GP $WP; sleep 1; kill $NP; wait
python3 "$here/overload-by-code.py"
