// The open-loop generator's round robin over several URLs (one per gateway, `--tenants-multi`):
// two real HTTP servers on loopback count what each received. Counts only, no rates.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runOpenLoop } from './poisson.ts'

const servers: Server[] = []
const hits: number[] = []

beforeAll(async () => {
  for (let i = 0; i < 2; i++) {
    hits.push(0)
    const s = createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        hits[i]!++
        res.end('{}')
      })
    })
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
    servers.push(s)
  }
})

afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))))
})

describe('runOpenLoop with urls', () => {
  it('sends request i to urls[i % urls.length] and answers every one', async () => {
    const urls = servers.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}/x`)
    const r = await runOpenLoop({ url: 'http://127.0.0.1:1/unused', urls, body: '{}', rate: 200, durationS: 0.2, seed: 7, drainMs: 5000 })
    const n = r.status.length
    expect(n).toBeGreaterThan(2)
    expect(r.status.every((s) => s === 200)).toBe(true)
    expect(hits).toEqual([Math.ceil(n / 2), Math.floor(n / 2)])
  })
})
