// HTTP load against a gateway on a test host: one OIP infer of the sleepy predictor per call, with a
// unique x so that every reply can be checked against its own request (y must be 2x).
import { Agent } from 'node:http'
import { request } from 'node:http'

/** The outcome of one request. */
export interface Outcome {
  x: number
  status: number
  /** y of a 200 reply. */
  y?: number
  code?: string
  error?: string
  retryAfter?: string | null
  /** Send to answer, ms. */
  ms: number
  /** When it was answered (performance.now()). */
  at: number
}

const agent = new Agent({ keepAlive: true, maxSockets: 512 })

/** POST a raw body; never rejects (a network error is status 0). */
export function post(
  url: string,
  body: string,
  headers: Record<string, string> = {},
  timeoutMs = 60_000,
): Promise<{ status: number; text: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve) => {
    const req = request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers }, timeout: timeoutMs },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (d: string) => (text += d))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, headers: res.headers }))
        res.on('error', (e) => resolve({ status: 0, text: String(e), headers: {} }))
      },
    )
    req.on('timeout', () => req.destroy(new Error('client timeout')))
    req.on('error', (e) => resolve({ status: 0, text: String(e), headers: {} }))
    req.end(body)
  })
}

/** OIP body of the sleepy predictor for one item. */
export function sleepyBody(x: number, sleepMs?: number): string {
  const inputs: unknown[] = [{ name: 'x', shape: [1], datatype: 'FP64', data: [x] }]
  if (sleepMs !== undefined) inputs.push({ name: 'sleepMs', shape: [1], datatype: 'FP64', data: [sleepMs] })
  return JSON.stringify({ inputs })
}

/** Infer y = 2x for one x on `base` (a gateway URL). */
export async function inferX(base: string, x: number, o: { sleepMs?: number; headers?: Record<string, string> } = {}): Promise<Outcome> {
  const t0 = performance.now()
  const r = await post(`${base}/v2/models/sleepy/infer`, sleepyBody(x, o.sleepMs), { 'x-cohort-timeout-ms': '20000', ...o.headers })
  const at = performance.now()
  const out: Outcome = { x, status: r.status, ms: at - t0, at, retryAfter: (r.headers['retry-after'] as string | undefined) ?? null }
  try {
    const b = JSON.parse(r.text) as { outputs?: { name: string; data: number[] }[]; code?: string; error?: string }
    if (r.status === 200) out.y = b.outputs?.find((t) => t.name === 'y')?.data[0]
    if (b.code) out.code = b.code
    if (b.error) out.error = b.error
  } catch {
    out.error = r.text.slice(0, 200)
  }
  return out
}

/** Wait until the gateway answers an inference (its workers are subscribed). */
export async function waitServing(base: string, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs
  let last: Outcome | undefined
  while (Date.now() < until) {
    last = await inferX(base, 0.5)
    if (last.status === 200 && last.y === 1) return
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(`gateway ${base} did not serve within ${timeoutMs} ms: ${JSON.stringify(last)}`)
}

/** Closed loop: `concurrency` clients, each sends its next request when the last is answered. */
export async function closedLoop(
  base: string,
  o: { concurrency: number; durationMs: number; nextX: () => number; sleepMs?: number },
): Promise<{ outcomes: Outcome[]; seconds: number }> {
  const outcomes: Outcome[] = []
  const t0 = performance.now()
  const end = t0 + o.durationMs
  await Promise.all(
    Array.from({ length: o.concurrency }, async () => {
      while (performance.now() < end) {
        outcomes.push(await inferX(base, o.nextX(), o.sleepMs === undefined ? {} : { sleepMs: o.sleepMs }))
      }
    }),
  )
  return { outcomes, seconds: (performance.now() - t0) / 1000 }
}

/** Problems of a batch of outcomes: a 200 whose y is not 2x (a reply for another request), and the rest. */
export function check(outcomes: Outcome[]): { ok: number; mismatched: Outcome[]; failed: Outcome[] } {
  const mismatched = outcomes.filter((o) => o.status === 200 && o.y !== 2 * o.x)
  const failed = outcomes.filter((o) => o.status !== 200)
  return { ok: outcomes.length - mismatched.length - failed.length, mismatched, failed }
}

/** Close the keep-alive sockets. */
export function closeAgent(): void {
  agent.destroy()
}
