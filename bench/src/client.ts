import { Agent, request } from 'node:http'
import type { SaturationResult } from './wrk.ts'
import { summarise, type LatencySummary } from './stats.ts'

/**
 * A minimal keep-alive HTTP/1.1 JSON POST client on node:http. Not `fetch`: on this kind of
 * machine undici's fetch adds ~2-3 ms per request, which would be counted as served latency.
 */
export class PostClient {
  readonly #agent: Agent
  readonly #url: URL
  readonly #body: Buffer

  constructor(url: string, body: string, connections = 1) {
    this.#url = new URL(url)
    this.#body = Buffer.from(body)
    this.#agent = new Agent({ keepAlive: true, maxSockets: connections })
  }

  /** POST the body once; resolves with the latency in ms, rejects on a non-2xx answer. */
  post(): Promise<number> {
    const t0 = performance.now()
    return new Promise((resolve, reject) => {
      const req = request(
        this.#url,
        {
          method: 'POST',
          agent: this.#agent,
          headers: { 'content-type': 'application/json', 'content-length': this.#body.length },
        },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (d: Buffer) => chunks.push(d))
          res.on('error', reject)
          res.on('end', () => {
            const status = res.statusCode ?? 0
            if (status < 200 || status >= 300) {
              reject(new Error(`POST ${this.#url.href}: HTTP ${status} ${Buffer.concat(chunks).toString().slice(0, 300)}`))
            } else {
              resolve(performance.now() - t0)
            }
          })
        },
      )
      req.on('error', reject)
      req.end(this.#body)
    })
  }

  /** Close the kept-alive sockets. */
  close(): void {
    this.#agent.destroy()
  }
}

/**
 * One request at a time: `count` requests, or (with `rate`) paced at `rate` per second for
 * `seconds`. Rejects on the first non-2xx answer. Returns the latency summary in ms.
 */
export async function sequential(url: string, body: string, o: { count: number } | { rate: number; seconds: number }): Promise<LatencySummary> {
  const client = new PostClient(url, body)
  const lat: number[] = []
  try {
    if ('count' in o) {
      for (let i = 0; i < o.count; i++) {
        lat.push(await client.post())
      }
      return summarise(lat)
    }
    const n = Math.max(1, Math.round(o.rate * o.seconds))
    const start = performance.now()
    for (let i = 0; i < n; i++) {
      const wait = start + (i * 1000) / o.rate - performance.now()
      if (wait > 0) {
        await new Promise((r) => setTimeout(r, wait))
      }
      lat.push(await client.post())
    }
    return summarise(lat)
  } finally {
    client.close()
  }
}

/**
 * Fallback load generator when wrk is missing: `connections` concurrent request loops for
 * `seconds`. It shares the CPU with the server, so it understates served throughput.
 */
export async function runNodeLoad(url: string, body: string, connections: number, seconds: number): Promise<SaturationResult> {
  const client = new PostClient(url, body, connections)
  const lat: number[] = []
  const t0 = performance.now()
  const until = t0 + seconds * 1000
  let failed = 0
  try {
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (performance.now() < until) {
          try {
            lat.push(await client.post())
          } catch {
            failed++
          }
        }
      }),
    )
  } finally {
    client.close()
  }
  if (failed > 0) {
    throw new Error(`node load generator got ${failed} failed requests to ${url}`)
  }
  const elapsed = (performance.now() - t0) / 1000
  const s = summarise(lat)
  return { tool: 'node', requests: lat.length, seconds: elapsed, requestsPerSec: lat.length / elapsed, p50Ms: s.p50Ms, p99Ms: s.p99Ms, non2xx: 0, socketErrors: 0 }
}
