// Property-style check over real NATS and a real ONNX model (the demo MLP, 256 -> 10): good requests
// sent together with fuzzed bad ones (seeded) are batched with them on the worker, yet every good
// request gets the answer it gets alone, every bad one a 4xx with a code, and the worker lives on.
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connect } from '@nats-io/transport-node'
import { postJson, spawnCohort, startNatsServer, writeModelFixtures, type CliProcess, type NatsServerHandle, ifStarted, allStarted } from '@cohort/test-support'

const SEED = 0xba7c4
const ROUNDS = 6
const GOOD_PER_ROUND = 6
const BAD_PER_ROUND = 14

let nats: NatsServerHandle
let worker: CliProcess
let gateway: CliProcess
let base = ''

beforeAll(async () => {
  const f = writeModelFixtures()
  nats = await startNatsServer()
  // The timer policy holds each batch open for 30 ms, so the requests of a round run together.
  worker = spawnCohort(['worker', '--nats', nats.url, '--id', 'fz', '--threads', '1', '--model', `demo=${f.demo}`, '--policy', 'timer', '--max-delay-ms', '30'])
  await worker.waitFor(/worker fz serving demo/, 60_000)
  gateway = spawnCohort(['gateway', '--nats', nats.url, '--port', '0', '--drain-ms', '0'])
  const [, port] = await gateway.waitFor(/gateway on http:\/\/127\.0\.0\.1:(\d+)/, 30_000)
  base = `http://127.0.0.1:${port}`
})

afterAll(async () => {
  await Promise.all(allStarted(worker, gateway).map((p) => p.stop('SIGKILL')))
  await ifStarted(nats)?.stop()
})

const row = fc.array(fc.float({ min: -4, max: 4, noNaN: true, noDefaultInfinity: true }), { minLength: 256, maxLength: 256 })
const good = (rows: number[][]) => ({ inputs: [{ name: 'input', datatype: 'FP32', shape: [rows.length, 256], data: rows.flat() }] })

/** Bad requests of every kind: the gateway refuses some, the worker the others (inside a batch). */
const bad = fc.oneof(
  // Rejected by the worker: wrong input name, wrong width, wrong datatype, extra input.
  row.map((r) => ({ inputs: [{ name: 'nope', datatype: 'FP32', shape: [1, 256], data: r }] })),
  row.map((r) => ({ inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 255], data: r.slice(1) }] })),
  row.map((r) => ({ inputs: [{ name: 'input', datatype: 'INT32', shape: [1, 256], data: r.map(Math.round) }] })),
  row.map((r) => ({
    inputs: [
      { name: 'input', datatype: 'FP32', shape: [1, 256], data: r },
      { name: 'extra', datatype: 'FP32', shape: [1], data: [1] },
    ],
  })),
  // Rejected by the gateway: shapes, data, types, syntax.
  fc.constantFrom(-1, 2 ** 53, 1e9, 0.5).map((d) => ({ inputs: [{ name: 'input', datatype: 'FP32', shape: [d, 256], data: [1] }] })),
  row.map((r) => ({ inputs: [{ name: 'input', datatype: 'FP32', shape: [2, 256], data: r }] })),
  row.map((r) => ({ inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 256], data: r.map((v, i) => (i === 7 ? 'NaN' : v)) }] })),
  fc.anything({ maxDepth: 2 }).map((v) => ({ inputs: v })),
  fc.string({ maxLength: 40 }).map((s) => `{"inputs": [${s}`),
  fc.constantFrom('{"inputs":[{"name":"input","datatype":"FP32","shape":[1,256],"data":[NaN]}]}', '', 'null', '[]'),
)

async function infer(body: unknown) {
  return postJson(`${base}/v2/models/demo/infer`, body)
}

describe('fuzzed bad requests batched with good ones (real NATS, real ONNX)', () => {
  it('answers the good ones exactly as alone, the bad ones 4xx, and the worker stays up', async () => {
    const rounds = fc.sample(
      fc.tuple(
        fc.array(fc.array(row, { minLength: 1, maxLength: 2 }), { minLength: GOOD_PER_ROUND, maxLength: GOOD_PER_ROUND }),
        fc.array(bad, { minLength: BAD_PER_ROUND, maxLength: BAD_PER_ROUND }),
      ),
      {
        seed: SEED,
        numRuns: ROUNDS,
      },
    )
    let badSeen = 0
    for (const [goods, bads] of rounds) {
      // Reference: each good request alone.
      const alone: number[][] = []
      for (const g of goods) {
        const r = await infer(good(g))
        expect(r.status, JSON.stringify(r.body)).toBe(200)
        alone.push(r.body.outputs[0].data)
      }
      // Together with the bad ones, interleaved, all at once.
      const mixed: { kind: 'good' | 'bad'; i: number; body: unknown }[] = [
        ...goods.map((g, i) => ({ kind: 'good' as const, i, body: good(g) })),
        ...bads.map((b, i) => ({ kind: 'bad' as const, i, body: b })),
      ].sort((a, b) => ((a.i * 7 + (a.kind === 'bad' ? 3 : 0)) % 11) - ((b.i * 7 + (b.kind === 'bad' ? 3 : 0)) % 11))
      const replies = await Promise.all(mixed.map((m) => infer(m.body)))
      replies.forEach((r, k) => {
        const m = mixed[k]!
        if (m.kind === 'good') {
          expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(200)
          const got = r.body.outputs[0].data as number[]
          const want = alone[m.i]!
          expect(got.length).toBe(want.length)
          // Same rows through the same model; batching may reorder float sums in the matmul.
          got.forEach((v, j) => expect(Math.abs(v - want[j]!), `output ${j}`).toBeLessThanOrEqual(1e-4 * Math.max(1, Math.abs(want[j]!))))
        } else {
          badSeen++
          expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBeGreaterThanOrEqual(400)
          expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBeLessThan(500)
          expect(typeof r.body.code, JSON.stringify(r.body).slice(0, 300)).toBe('string')
        }
      })
    }
    expect(badSeen).toBe(ROUNDS * BAD_PER_ROUND)
    // Bad requests did reach the worker (not only the gateway's checks), and batches were shared.
    const nc = await connect({ servers: nats.url })
    try {
      const m = await nc.request('$SRV.STATS.cohort-worker.fz', new Uint8Array(0), { timeout: 5_000 })
      const stats = m.json<{ endpoints: { num_errors: number; data: { mean_batch_size: number } }[] }>()
      const ep = stats.endpoints[0]!
      expect(ep.num_errors, JSON.stringify(stats)).toBeGreaterThanOrEqual(ROUNDS)
      expect(ep.data.mean_batch_size, JSON.stringify(stats)).toBeGreaterThan(1)
    } finally {
      await nc.close()
    }
    // The worker is alive and ready, and still serves.
    expect(worker.proc.exitCode).toBeNull()
    const ready = await fetch(`${base}/v2/health/ready`)
    expect(ready.status).toBe(200)
    const last = await infer(good([Array.from({ length: 256 }, (_, i) => i / 256)]))
    expect(last.status).toBe(200)
  })
})
