#!/usr/bin/env node
// How much gateway memory a JSON body costs per byte of its length, against the in-flight bound's
// weight (JSON_BODY_WEIGHT, apps/gateway/src/middleware/inflight/index.ts). Starts nats-server, a
// `cohort worker` (the demo model) and a `cohort gateway` with --max-inflight-bytes BOUND, sends N parallel
// OIP JSON bodies of about S bytes each (FP32 [K, 256], the demo model's input), and samples the
// gateway process's RSS every 10 ms. The first round is the one that counts (later rounds reuse the heap
// the first one grew: their "over baseline" is low).
// Prints the baseline RSS, the peak over it, and the peak per body byte sent at once.
//
// Usage: node scripts/json-weight.mjs [N=8] [S_MiB=8] [BOUND_MiB=256] [ROUNDS=3]
import { execFileSync, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const [N = 8, S = 8, BOUND = 256, ROUNDS = 3] = process.argv.slice(2).map(Number)
const BIN = fileURLToPath(new URL('../apps/cli/bin/cohort.js', import.meta.url))
const children = []
process.on('exit', () => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')))
const demo = execFileSync(process.execPath, [BIN, 'demo-model'], { encoding: 'utf8' }).trim()
const start = (cmd, args, re) => {
  const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(p)
  let text = ''
  p.stdout.on('data', (d) => (text += d))
  p.stderr.on('data', (d) => (text += d))
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${cmd} ${args[0]}: no ${re} in:\n${text}`)), 120_000)
    const check = () => {
      const m = text.match(re)
      if (m) {
        clearTimeout(t)
        resolve({ p, m })
      } else setTimeout(check, 50)
    }
    check()
  })
}
const natsPort = 20000 + Math.floor(Math.random() * 20000)
await start('nats-server', ['-a', '127.0.0.1', '-p', String(natsPort)], /Server is ready/)
const nats = `nats://127.0.0.1:${natsPort}`
await start(process.execPath, [BIN, 'worker', '--nats', nats, '--id', 'jw', '--model', `demo=${demo}`], /worker jw serving/)
const gw = await start(
  process.execPath,
  [BIN, 'gateway', '--nats', nats, '--port', '0', '--max-inflight-bytes', String(BOUND << 20), '--timeout-ms', '60000'],
  /gateway on http:\/\/127\.0\.0\.1:(\d+)/,
)
const proc = gw.p
const port = Number(gw.m[1])
const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'))[1]) * 1024
const MiB = (b) => (b / 2 ** 20).toFixed(0)

// FP32 values as JSON text of about S MiB ("0.123456," is 9 bytes a value).
const count = Math.floor((S << 20) / 9 / 256) * 256
const data = new Array(count)
for (let i = 0; i < count; i++) data[i] = Math.round(Math.random() * 1e6) / 1e6
const body = JSON.stringify({ inputs: [{ name: 'input', datatype: 'FP32', shape: [count / 256, 256], data }] })
const url = `http://127.0.0.1:${port}/v2/models/demo/infer`
// Warm up (code paths, the worker) with small requests, then settle.
for (let i = 0; i < 5; i++)
  await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: body.slice(0, 0) + '{"inputs":[{"name":"input","datatype":"FP32","shape":[1,256],"data":[' + Array(256).fill(0.5).join(',') + ']}]}',
  }).then((r) => r.arrayBuffer())
await new Promise((r) => setTimeout(r, 2000))

console.log(
  `json-weight: N=${N} bodies of ${MiB(body.length)} MiB at once (${MiB(N * body.length)} MiB, counted ${MiB(3 * N * body.length)} MiB at weight 3) under --max-inflight-bytes ${BOUND} MiB`,
)
for (let round = 1; round <= ROUNDS; round++) {
  const base = rss()
  let peak = base
  const timer = setInterval(() => (peak = Math.max(peak, rss())), 10)
  const statuses = await Promise.all(
    Array.from({ length: N }, () => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(async (r) => (await r.arrayBuffer(), r.status))),
  )
  clearInterval(timer)
  peak = Math.max(peak, rss())
  const over = peak - base
  const counts = {}
  for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1
  console.log(
    `round ${round}: baseline ${MiB(base)} MiB, peak ${MiB(peak)} MiB, over baseline ${MiB(over)} MiB = ${(over / (N * body.length)).toFixed(2)} x the bytes sent at once; statuses ${JSON.stringify(counts)}`,
  )
  await new Promise((r) => setTimeout(r, 3000))
}
for (const c of children.reverse()) {
  c.kill('SIGTERM')
  await new Promise((r) => (c.exitCode !== null ? r() : c.once('exit', r)))
}
