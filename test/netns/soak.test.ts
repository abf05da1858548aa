// Soak (issue 6, item 4): two workers of the sleep-based sleepy predictor (one request at a time each),
// a gateway and NATS on separate test hosts. First the capacity is measured (closed loop), then an
// open loop sends mixed valid and invalid requests for SOAK_SECONDS (default 60) so that the requests
// that reach the model come at 80% of that capacity. Every reply is checked against its own request:
// 0 lost (every request gets an HTTP answer), 0 mismatched (each carries its own y). Duplicates are
// counted where they would happen, at the model: both workers log every batch they run (SLEEPY_LOG)
// and each request that reaches the model must have run exactly once, the others never.
// Resident memory (VmRSS) of every process is sampled; growth is reported and bounded (generously:
// Node heaps grow before they settle).
import { appendFileSync } from 'node:fs'
import { afterAll, expect, it } from 'vitest'
import { sleepyLogPath, sleepyRuns } from '@cohort/test-support'
import { Lab } from './support/cluster.ts'
import { check, closeAgent, closedLoop, post, sleepyBody, waitServing } from './support/load.ts'

const SECONDS = Number(process.env['SOAK_SECONDS'] ?? 60)
const COST_MS = 20
const lab = new Lab()
afterAll(async () => {
  closeAgent()
  await lab.close()
})

/** The kinds of request in the mix, with what each must get back. */
type Kind = 'valid' | 'badJson' | 'badInput' | 'itemFails'
/**
 * Per 10 requests: 7 valid, 1 of each invalid kind. `badJson`/`badInput` never reach the model, and
 * each carries a well-formed `x` that would reach it if the check refusing it broke: `badJson` is a
 * valid request followed by a stray `}` (a parser that took the first value would run it),
 * `badInput` a valid `x` with `sleepMs: -1` (below the predictor's minimum of 0: input validation).
 * The sleepy log counts the runs of every x at the model (below): these two must show 0.
 */
const MIX: Kind[] = ['valid', 'valid', 'badJson', 'valid', 'valid', 'badInput', 'valid', 'valid', 'itemFails', 'valid']
const REACHES_MODEL = MIX.filter((k) => k === 'valid' || k === 'itemFails').length / MIX.length

function body(kind: Kind, x: number): string {
  switch (kind) {
    case 'valid':
      return sleepyBody(x)
    case 'badJson':
      return `${sleepyBody(x)}}`
    case 'badInput':
      return sleepyBody(x, -1)
    case 'itemFails':
      return JSON.stringify({
        inputs: [
          { name: 'x', shape: [1], datatype: 'FP64', data: [x] },
          { name: 'fail', shape: [1], datatype: 'BOOL', data: [true] },
        ],
      })
  }
}

/** The problem with a reply, or undefined when it is the expected one for its request. */
function problem(kind: Kind, x: number, status: number, text: string): string | undefined {
  let b: { outputs?: { name: string; data: number[] }[]; code?: string; error?: string }
  try {
    b = JSON.parse(text)
  } catch {
    return `${kind} x=${x}: status ${status}, unreadable body ${text.slice(0, 80)}`
  }
  const got = `${status} ${b.code ?? ''}`
  const want: Record<Kind, string> = { valid: '200 ', badJson: '400 BAD_REQUEST', badInput: '400', itemFails: '500 PREDICTOR_FAILED' }
  if (kind === 'badInput' ? status !== 400 : got !== want[kind]) {
    return `${kind} x=${x}: got ${got} ${b.error ?? ''}, want ${want[kind]}`
  }
  if (kind === 'valid' && b.outputs?.find((o) => o.name === 'y')?.data[0] !== 2 * x) {
    return `valid x=${x}: y=${JSON.stringify(b.outputs)} is not ${2 * x}`
  }
  if (kind === 'itemFails' && !b.error?.includes(`x=${x} failed`)) {
    return `itemFails x=${x}: the error names another item: ${b.error}`
  }
  return undefined
}

it(
  `${SECONDS} s of mixed valid and invalid requests at 80% of capacity: 0 lost, 0 duplicated, 0 mismatched; memory stable`,
  async () => {
    for (const h of ['n1', 'gw', 'w1', 'w2']) lab.net.addHost(h)
    const { urls, nodes } = await lab.nats(['n1'])
    const args = ['--max-batch-size', '1']
    const log = sleepyLogPath()
    const env = { SLEEPY_LOG: log }
    const [w1, w2] = await Promise.all([lab.worker('w1', urls, 'soak-1', { sleepMs: COST_MS, args, env }), lab.worker('w2', urls, 'soak-2', { sleepMs: COST_MS, args, env })])
    const gw = await lab.gateway('gw', urls)
    await waitServing(gw.url)

    let nextX = 1
    await closedLoop(gw.url, { concurrency: 8, durationMs: 1000, nextX: () => nextX++ }) // warm-up
    const cap = await closedLoop(gw.url, { concurrency: 8, durationMs: 4000, nextX: () => nextX++ })
    expect(check(cap.outcomes).failed).toEqual([])
    const capacity = cap.outcomes.length / cap.seconds
    const modelRate = 0.8 * capacity
    const rate = modelRate / REACHES_MODEL

    const procs = { gateway: gw.proc, 'worker-1': w1, 'worker-2': w2, nats: nodes[0]! }
    const rss: Record<string, number[]> = Object.fromEntries(Object.keys(procs).map((k) => [k, []]))
    const sample = () => {
      for (const [k, p] of Object.entries(procs)) rss[k]!.push(p.rssKiB() ?? NaN)
    }
    const sampler = setInterval(sample, 5000)

    const answered = new Set<number>() // x of the requests that got an HTTP answer
    const kinds = new Map<number, Kind>() // x -> kind, for every request of the soak
    const problems: string[] = []
    let sent = 0
    let lost = 0
    const inflight: Promise<void>[] = []
    const t0 = performance.now()
    const total = Math.round(SECONDS * rate)
    for (let i = 0; i < total; i++) {
      const due = t0 + (i * 1000) / rate
      const wait = due - performance.now()
      if (wait > 1) await new Promise((r) => setTimeout(r, wait))
      const kind = MIX[i % MIX.length]!
      const x = nextX++ + 0.5
      kinds.set(x, kind)
      sent++
      inflight.push(
        post(`${gw.url}/v2/models/sleepy/infer`, body(kind, x), { 'x-cohort-timeout-ms': '20000' }, 30_000).then((r) => {
          if (r.status === 0) {
            lost++
            problems.push(`${kind} x=${x}: no HTTP answer (${r.text})`)
            return
          }
          answered.add(x)
          const p = problem(kind, x, r.status, r.text)
          if (p) problems.push(p)
        }),
      )
    }
    const sendSeconds = (performance.now() - t0) / 1000
    await Promise.all(inflight)
    clearInterval(sampler)
    sample()

    // Runs per request at the model: a request run twice (a redelivery, a retry of a request that
    // already ran) shows up as 2; one that reached the model must show up exactly once.
    const runs = sleepyRuns(log)
    const duplicated = [...kinds.keys()].filter((x) => (runs.get(x) ?? 0) > 1)
    const wrongRuns = [...kinds.entries()]
      .map(([x, k]) => ({ x, kind: k, runs: runs.get(x) ?? 0, want: k === 'valid' || k === 'itemFails' ? 1 : 0 }))
      .filter((r) => r.runs !== r.want)
    const growth = Object.fromEntries(
      Object.entries(rss).map(([k, v]) => {
        const first = v.find((n) => Number.isFinite(n)) ?? NaN
        const last = v[v.length - 1] ?? NaN
        return [k, { firstMiB: +(first / 1024).toFixed(1), lastMiB: +(last / 1024).toFixed(1), growthPct: +((100 * (last - first)) / first).toFixed(1) }]
      }),
    )
    const result = {
      seconds: SECONDS,
      capacityRps: +capacity.toFixed(1),
      offeredRps: +(sent / sendSeconds).toFixed(1),
      modelRps: +((sent * REACHES_MODEL) / sendSeconds).toFixed(1),
      sent,
      answered: answered.size,
      lost,
      duplicated: duplicated.length,
      runsNotAsExpected: wrongRuns.length,
      mismatched: problems.length - lost,
      rss: growth,
    }
    console.log(`netns soak: ${JSON.stringify(result)}`)
    const file = process.env['COHORT_NETNS_REPORT']
    if (file) appendFileSync(file, JSON.stringify({ name: 'soak', ...result }) + '\n')

    expect(problems.slice(0, 20)).toEqual([])
    expect(lost).toBe(0)
    expect(answered.size).toBe(sent)
    expect(duplicated.slice(0, 20), 'requests run more than once').toEqual([])
    expect(wrongRuns.slice(0, 20), 'runs at the model per request (valid and itemFails once, the rest never)').toEqual([])
    for (const [k, g] of Object.entries(growth)) {
      // Generous: a leak of a few KiB per request (6000+ requests) would pass 64 MiB only over a long soak.
      expect(g.lastMiB, `${k} resident memory`).toBeLessThanOrEqual(Math.max(g.firstMiB * 1.5, g.firstMiB + 64))
    }
  },
  (SECONDS + 240) * 1000,
)
