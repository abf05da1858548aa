#!/usr/bin/env node
// A closed-loop flood of POST /models/sleepy/predictions (a Cog prediction, no client deadline):
// CLIENTS keep-alive clients, each resending at once after a 200 and 100 ms after anything else,
// for MS ms, after 8 warm-up requests. Prints the status mix, the 200s' latency (p50, p99, max),
// how many 200s came within SLO_MS, and, given the gateway's PID, its CPU per request from /proc.
// Not a benchmark of record (Node client, closed loop): docs/reliability.md#no-wait-the-door-cannot-see.
// usage: node scripts/bench/closed-loop-flood.mjs PORT [CLIENTS=60] [MS=6000] [SLO_MS=1000] [PID]
import { readFileSync } from 'node:fs'
import { Agent, request } from 'node:http'

const [port, clients = 60, ms = 6000, slo = 1000, pid] = process.argv.slice(2).map(Number)
const agent = new Agent({ keepAlive: true, maxSockets: clients })
const cpu = () =>
  pid
    ? readFileSync(`/proc/${pid}/stat`, 'utf8')
        .split(') ')[1]
        .split(' ')
        .slice(11, 13)
        .reduce((a, b) => a + Number(b), 0) * 10
    : 0
const one = () =>
  new Promise((resolve) => {
    const t0 = performance.now()
    const req = request({ host: '127.0.0.1', port, path: '/models/sleepy/predictions', method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume()
      res.on('end', () => resolve({ s: res.statusCode, ms: performance.now() - t0 }))
    })
    req.on('error', () => resolve({ s: 0, ms: performance.now() - t0 }))
    req.end(JSON.stringify({ input: { x: 1 } }))
  })
for (let i = 0; i < 8; i++) await one()
const out = []
const c0 = cpu()
const end = performance.now() + ms
await Promise.all(
  Array.from({ length: clients }, async () => {
    while (performance.now() < end) {
      const a = await one()
      out.push(a)
      if (a.s !== 200) await new Promise((r) => setTimeout(r, 100))
    }
  }),
)
const cpuMs = cpu() - c0
const by = {}
for (const a of out) by[a.s] = (by[a.s] ?? 0) + 1
const ok = out
  .filter((a) => a.s === 200)
  .map((a) => a.ms)
  .sort((x, y) => x - y)
const q = (p) => ok[Math.min(ok.length - 1, Math.floor(ok.length * p))]?.toFixed(0)
console.log(
  JSON.stringify({
    requests: out.length,
    byStatus: by,
    okP50Ms: q(0.5),
    okP99Ms: q(0.99),
    okMaxMs: ok.at(-1)?.toFixed(0),
    okWithinSlo: ok.filter((m) => m <= slo).length,
    ...(pid ? { gatewayCpuUsPerRequest: Math.round((cpuMs * 1000) / out.length) } : {}),
  }),
)
agent.destroy()
