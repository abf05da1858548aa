import { Agent, request } from 'node:http'
import { mulberry32 } from '@cohort/onnx-builder'

/** One open-loop load step, as sent to the load-generator process. */
export interface LoadStep {
  /** Full URL to POST to. */
  url: string
  /** Several URLs (one per gateway): request i goes to `urls[i % urls.length]`, round robin as a load balancer would, each with its own `maxSockets`; overrides `url`. */
  urls?: string[]
  /** Request body (JSON text); encoded once into a Buffer. */
  body: string
  /** Extra request headers (e.g. `x-cohort-timeout-ms`). */
  headers?: Record<string, string>
  /** Mean arrival rate, requests per second (Poisson: exponential inter-arrival times). */
  rate: number
  /** Length of the arrival schedule, in seconds. */
  durationS: number
  /** Hard cap on the number of requests. @default 200000 */
  maxCount?: number
  /** PRNG seed of the schedule (same seed, same schedule). */
  seed: number
  /** How long to wait for the last answers after the last send, in ms. @default 5000 */
  drainMs?: number
  /** Connection cap of the keep-alive agent. @default 256 (`cohort bench policies` passes 1024) */
  maxSockets?: number
}

/**
 * What one step measured, per request (same index in every array). Latency is counted from the
 * request's *scheduled* send time (MLPerf server scenario), so generator lag counts as latency.
 */
export interface LoadRecords {
  /** Scheduled send time, ms from the step's start. */
  scheduledMs: number[]
  /** Scheduled send to the end of the response, in ms (NaN when there was no response). */
  latencyMs: number[]
  /** HTTP status; 0 = no answer before the drain ended, -1 = socket error. */
  status: number[]
  /** Per request, the actual `request()` call minus its scheduled send time, in ms (generator lag). */
  lagMs: number[]
  /** Per request, the time from the `request()` call until the agent gave it a socket, in ms (waiting for one of `maxSockets`); NaN: never got one. */
  queuedMs: number[]
  /** Largest delay between a scheduled send time and the actual `request()` call, in ms. */
  lagMaxMs: number
  /** 99th percentile of that delay, in ms. */
  lagP99Ms: number
  /** Wall time from the first scheduled send to the last answer, in seconds. */
  wallS: number
  /** The schedule's length (the step's duration), in seconds. */
  durationS: number
}

/**
 * Arrival offsets (ms from the start) of a Poisson process of `rate` per second over `durationS`
 * seconds, at most `maxCount`: exponential gaps `-ln(1-u)/rate` from mulberry32(seed).
 */
export function poissonSchedule(rate: number, durationS: number, seed: number, maxCount = 200_000): Float64Array {
  if (!(rate > 0) || !(durationS > 0)) {
    return new Float64Array(0)
  }
  const rnd = mulberry32(seed)
  const endMs = durationS * 1000
  const out: number[] = []
  let t = (-Math.log(1 - rnd()) / rate) * 1000
  while (t < endMs && out.length < maxCount) {
    out.push(t)
    t += (-Math.log(1 - rnd()) / rate) * 1000
  }
  return Float64Array.from(out)
}

function p99(xs: Float64Array): number {
  if (xs.length === 0) {
    return 0
  }
  const s = Float64Array.from(xs).sort()
  return s[Math.min(s.length - 1, Math.ceil(0.99 * s.length) - 1)] ?? 0
}

/**
 * Run one open-loop step in this process: every request is sent at its scheduled time whatever
 * the answers do (no coordinated omission), over node:http with a keep-alive agent capped at
 * `maxSockets` connections (beyond that, requests wait in the agent, which counts as latency).
 * Stops by itself: the schedule is bounded, and answers still missing `drainMs` after the last
 * send are recorded as lost (status 0).
 */
export function runOpenLoop(step: LoadStep): Promise<LoadRecords> {
  const sched = poissonSchedule(step.rate, step.durationS, step.seed, step.maxCount)
  const n = sched.length
  const body = Buffer.from(step.body)
  const urls = (step.urls !== undefined && step.urls.length > 0 ? step.urls : [step.url]).map((u) => new URL(u))
  const agent = new Agent({ keepAlive: true, maxSockets: step.maxSockets ?? 256, maxFreeSockets: step.maxSockets ?? 256 })
  const headers = { 'content-type': 'application/json', 'content-length': String(body.length), ...(step.headers ?? {}) }
  const latency = new Float64Array(n).fill(Number.NaN)
  const status = new Int16Array(n)
  const lag = new Float64Array(n)
  const queued = new Float64Array(n).fill(Number.NaN)
  const t0 = performance.now() + 5
  return new Promise((resolve) => {
    let pending = n
    let next = 0
    let lastAnswer = t0
    let drainTimer: NodeJS.Timeout | undefined
    let finished = false
    const done = () => {
      if (finished) {
        return
      }
      finished = true
      clearTimeout(drainTimer)
      agent.destroy()
      resolve({
        scheduledMs: Array.from(sched),
        latencyMs: Array.from(latency),
        status: Array.from(status),
        lagMs: Array.from(lag),
        queuedMs: Array.from(queued),
        lagMaxMs: lag.reduce((a, b) => Math.max(a, b), 0),
        lagP99Ms: p99(lag),
        wallS: (lastAnswer - t0) / 1000,
        durationS: step.durationS,
      })
    }
    const settle = (i: number, s: number) => {
      if (status[i] !== 0 || finished) {
        return
      }
      const now = performance.now()
      status[i] = s
      latency[i] = now - (t0 + (sched[i] as number))
      lastAnswer = Math.max(lastAnswer, now)
      if (--pending === 0) {
        done()
      }
    }
    const send = (i: number) => {
      const called = performance.now()
      const req = request(urls[i % urls.length] as URL, { method: 'POST', agent, headers }, (res) => {
        res.on('error', () => settle(i, -1))
        res.on('end', () => settle(i, res.statusCode ?? -1))
        res.resume()
      })
      req.once('socket', () => (queued[i] = performance.now() - called))
      req.on('error', () => settle(i, -1))
      req.end(body)
    }
    const tick = () => {
      const now = performance.now()
      while (next < n && t0 + (sched[next] as number) <= now) {
        lag[next] = now - (t0 + (sched[next] as number))
        send(next++)
      }
      if (next < n) {
        setTimeout(tick, Math.max(0, t0 + (sched[next] as number) - performance.now()))
      } else {
        drainTimer = setTimeout(done, step.drainMs ?? 5000)
      }
    }
    if (n === 0) {
      done()
      return
    }
    setTimeout(tick, Math.max(0, t0 + (sched[0] as number) - performance.now()))
  })
}
