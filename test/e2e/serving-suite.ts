// The end-to-end serving suite, run once over real NATS with separate processes and once over
// the in-process transport (embedded mode). Tests run in order: the last ones stop workers.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import * as ort from 'onnxruntime-node'
import { parsePrometheus } from '@cohort/metrics'
import { getJson, pool, postJson, writeModelFixtures, type ModelFixtures, ifStarted } from '@cohort/test-support'

/** What a suite needs from an environment. */
export interface ServingEnv {
  baseUrl: string
  /** Prometheus text of every worker, concatenated. */
  workerMetrics(): Promise<string>
  /** Gracefully stop one worker (SIGTERM / drain) and resolve when it has exited. */
  stopOneWorker(): Promise<void>
  stopAllWorkers(): Promise<void>
  close(): Promise<void>
}

/** Sum a metric over every series whose key matches (across several workers' texts). */
export function metricSum(text: string, prefix: string): number {
  let sum = 0
  for (const chunk of text.split('\n# EOF\n')) {
    for (const [k, v] of parsePrometheus(chunk)) {
      if (k.startsWith(prefix)) {
        sum += v
      }
    }
  }
  return sum
}

function rand(seed: number) {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export function defineServingSuite(label: string, setup: (f: ModelFixtures) => Promise<ServingEnv>): void {
  describe(label, () => {
    let env: ServingEnv
    let fx: ModelFixtures
    let demo: ort.InferenceSession
    const url = (p: string) => `${env.baseUrl}${p}`
    /** Wait until the workers hold at least n sleepy items (queued or running). */
    const waitForPending = (n: number) =>
      vi.waitFor(async () => expect(metricSum(await env.workerMetrics(), 'cohort_pending_requests{model="sleepy"')).toBeGreaterThanOrEqual(n), { timeout: 10_000, interval: 10 })

    beforeAll(async () => {
      fx = writeModelFixtures()
      demo = await ort.InferenceSession.create(fx.demo)
      env = await setup(fx)
    })
    afterAll(async () => {
      await ifStarted(env)?.close()
      await ifStarted(demo)?.release()
    })

    it('answers health and model metadata from the workers', async () => {
      expect((await getJson(url('/v2/health/live'))).status).toBe(200)
      const ready = await getJson(url('/v2/health/ready'))
      expect(ready.status).toBe(200)
      const meta = await getJson(url('/v2/models/demo'))
      expect(meta.status).toBe(200)
      expect(meta.body).toMatchObject({
        name: 'demo',
        platform: 'onnxruntime_onnx',
        inputs: [{ name: 'input', datatype: 'FP32', shape: [-1, 256] }],
        outputs: [{ name: 'logits', datatype: 'FP32', shape: [-1, 10] }],
      })
      expect((await getJson(url('/v2/models/demo/ready'))).status).toBe(200)
      expect((await getJson(url('/v2/models/demo/versions/1'))).status).toBe(200)
      expect((await getJson(url('/v2/models/demo/versions/7'))).status).toBe(404)
      expect((await getJson(url('/v2/models/nope'))).status).toBe(404)
    })

    it('gives every concurrent request exactly its own outputs (equal to ORT on that item alone)', async () => {
      const r = rand(7)
      const reqs = Array.from({ length: 96 }, (_, i) => {
        const rows = 1 + (i % 3)
        return { rows, data: Float32Array.from({ length: rows * 256 }, () => r() * 2 - 1) }
      })
      const replies = await pool(reqs, 32, (q, i) =>
        postJson(url('/v2/models/demo/infer'), {
          id: `req-${i}`,
          inputs: [{ name: 'input', datatype: 'FP32', shape: [q.rows, 256], data: Array.from(q.data) }],
        }),
      )
      for (const [i, q] of reqs.entries()) {
        const rep = replies[i]!
        expect(rep.status, JSON.stringify(rep.body)).toBe(200)
        expect(rep.body.id).toBe(`req-${i}`)
        expect(rep.body.outputs[0].shape).toEqual([q.rows, 10])
        for (let row = 0; row < q.rows; row++) {
          const alone = await demo.run({ input: new ort.Tensor('float32', q.data.slice(row * 256, (row + 1) * 256), [1, 256]) })
          const want = alone['logits']!.data as Float32Array
          const got = rep.body.outputs[0].data.slice(row * 10, (row + 1) * 10) as number[]
          got.forEach((v, k) => expect(Math.abs(v - want[k]!)).toBeLessThan(1e-4 * Math.max(1, Math.abs(want[k]!))))
        }
      }
    })

    it('serves multi-input models with INT64 inputs and honours requested outputs', async () => {
      const body = {
        inputs: [
          {
            name: 'x',
            datatype: 'FP32',
            shape: [2, 4],
            data: [
              [1, 2, 3, 4],
              [5, 6, 7, 8],
            ],
          },
          { name: 'ids', datatype: 'INT64', shape: [2, 3], data: [1, -2, 3, 40000, 5, 6] },
        ],
      }
      const all = await postJson(url('/v2/models/multi-io/infer'), body)
      expect(all.status, JSON.stringify(all.body)).toBe(200)
      const out = Object.fromEntries(all.body.outputs.map((o: { name: string }) => [o.name, o]))
      expect(out['y'].data).toEqual([3, 5, 7, 9, 11, 13, 15, 17])
      expect(out['ids_sq']).toMatchObject({ datatype: 'INT64', shape: [2, 3], data: [1, 4, 9, 1.6e9, 25, 36] })
      expect(out['x_sum'].data).toEqual([10, 26])
      const one = await postJson(url('/v2/models/multi-io/infer'), { ...body, outputs: [{ name: 'ids_sq' }] })
      expect(one.body.outputs.map((o: { name: string }) => o.name)).toEqual(['ids_sq'])
      const bad = await postJson(url('/v2/models/multi-io/infer'), { ...body, outputs: [{ name: 'nope' }] })
      expect(bad.status).toBe(400)
    })

    it('round-trips every datatype through an identity model', async () => {
      const cases: [string, unknown[]][] = [
        ['BOOL', [true, false, false, true]],
        ['UINT8', [0, 255, 7, 8]],
        ['INT8', [-128, 127, 0, -1]],
        ['UINT16', [0, 65535, 1, 2]],
        ['INT16', [-32768, 32767, 3, 4]],
        ['UINT32', [0, 4294967295, 5, 6]],
        ['INT32', [-2147483648, 2147483647, 7, 8]],
        ['INT64', [-9007199254740991, 9007199254740991, 9, 10]],
        ['UINT64', [0, 9007199254740991, 11, 12]],
        ['FP16', [0.5, -2, 65504, 0.25]],
        ['FP32', [0.5, -1.25, 3.5, 1e-3]],
        ['FP64', [0.1, -1e300, 3.141592653589793, 2]],
        ['BYTES', ['', 'héllo', 'ascii', '🙂']],
      ]
      const inputs = cases.map(([dt, data]) => ({ name: `in_${dt}`, datatype: dt, shape: [2, 2], data }))
      const rep = await postJson(url('/v2/models/identity/infer'), { inputs })
      expect(rep.status, JSON.stringify(rep.body)).toBe(200)
      for (const [dt, data] of cases) {
        const o = rep.body.outputs.find((x: { name: string }) => x.name === `out_${dt}`)
        expect(o, dt).toMatchObject({ datatype: dt, shape: [2, 2] })
        if (dt === 'FP32') {
          ;(o.data as number[]).forEach((v, i) => expect(v).toBeCloseTo(data[i] as number, 6))
        } else {
          expect(o.data, dt).toEqual(data)
        }
      }
    })

    it('never mixes items of different non-batch shapes in one batch', async () => {
      const reqs = Array.from({ length: 24 }, (_, i) => 1 + (i % 4))
      const replies = await pool(reqs, 24, (seq) =>
        postJson(url('/v2/models/varlen/infer'), {
          inputs: [{ name: 'tokens', datatype: 'FP32', shape: [2, seq], data: Array.from({ length: 2 * seq }, (_, k) => k + 1) }],
        }),
      )
      replies.forEach((rep, i) => {
        const seq = reqs[i]!
        expect(rep.status, JSON.stringify(rep.body)).toBe(200)
        const s1 = (seq * (seq + 1)) / 2
        const s2 = (2 * seq * (2 * seq + 1)) / 2 - s1
        expect(rep.body.outputs[0].data).toEqual([s1, s2])
      })
    })

    it('batches concurrent requests: mean batch size above 4 under 64 concurrent clients', async () => {
      const before = await env.workerMetrics()
      const n0 = metricSum(before, 'cohort_batch_size_count{model="sleepy"')
      const s0 = metricSum(before, 'cohort_batch_size_sum{model="sleepy"')
      // A 150 ms sleep per batch: batch sizes then depend on concurrency, not on CPU speed.
      const xs = Array.from({ length: 320 }, (_, i) => i)
      const replies = await pool(xs, 64, (x) =>
        postJson(
          url('/v2/models/sleepy/infer'),
          {
            inputs: [
              { name: 'x', datatype: 'FP64', shape: [1], data: [x] },
              { name: 'sleepMs', datatype: 'FP64', shape: [1], data: [125] },
            ],
            // An explicit deadline: this test is about batch sizes, not the model's default SLO.
          },
          { 'x-cohort-timeout-ms': '30000' },
        ),
      )
      replies.forEach((rep, i) => {
        expect(rep.status, JSON.stringify(rep.body)).toBe(200)
        expect(rep.body.outputs.find((o: { name: string }) => o.name === 'y').data).toEqual([i * 2])
      })
      const after = await env.workerMetrics()
      const batches = metricSum(after, 'cohort_batch_size_count{model="sleepy"') - n0
      const items = metricSum(after, 'cohort_batch_size_sum{model="sleepy"') - s0
      expect(items).toBe(320)
      expect(items / batches).toBeGreaterThan(4)
    })

    it('answers bad input with 400/404/413 and a readable message, and keeps serving', async () => {
      const infer = (body: unknown, model = 'demo') => postJson(url(`/v2/models/${model}/infer`), body)
      const good = { inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 256], data: new Array(256).fill(0.5) }] }
      const cases: [unknown, number, string, RegExp][] = [
        ['{not json', 400, 'BAD_REQUEST', /JSON/],
        [{ inputs: [] }, 400, 'BAD_REQUEST', /inputs/],
        [{ inputs: [{ name: 'input', datatype: 'FP99', shape: [1, 256], data: [] }] }, 400, 'BAD_REQUEST', /datatype/],
        [{ inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 256], data: [1, 2, 3] }] }, 400, 'BAD_REQUEST', /256/],
        [{ inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 256], data: new Array(256).fill('x') }] }, 400, 'BAD_REQUEST', /.+/],
        [{ inputs: [{ name: 'input', datatype: 'INT64', shape: [1, 256], data: new Array(256).fill(1) }] }, 400, 'INVALID_INPUT', /FP32/],
        [{ inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 255], data: new Array(255).fill(1) }] }, 400, 'INVALID_INPUT', /shape/],
        [{ inputs: [{ name: 'wrong', datatype: 'FP32', shape: [1, 256], data: new Array(256).fill(1) }] }, 400, 'INVALID_INPUT', /input/],
        [{ inputs: [{ name: 'input', datatype: 'FP32', shape: [-1, 256], data: [] }] }, 400, 'BAD_REQUEST', /shape/],
      ]
      for (const [body, status, code, msg] of cases) {
        const rep = await infer(body)
        expect(rep.status, JSON.stringify(body).slice(0, 80)).toBe(status)
        expect(rep.body.code).toBe(code)
        expect(rep.body.error).toMatch(msg)
      }
      const unknown = await infer(good, 'no-such-model')
      expect(unknown.status).toBe(404)
      expect(unknown.body.code).toBe('MODEL_NOT_FOUND')
      // 1 Mi floats: past the 1 MiB bound both envs set (in-process maxMessageBytes; the gateway's --max-message-bytes).
      const big = { inputs: [{ name: 'input', datatype: 'FP32', shape: [1024, 256], data: new Array(1024 * 256).fill(0.123456) }] }
      const tooBig = await infer(big)
      expect(tooBig.status).toBe(413)
      expect(tooBig.body.code).toBe('PAYLOAD_TOO_LARGE')
      expect((await infer(good)).status).toBe(200)
    })

    it('fails one item alone, fails a whole batch on a throw, and the worker lives', async () => {
      const sleepy = (x: number, extra: Record<string, unknown> = {}) => postJson(url('/models/sleepy/predictions'), { input: { x, ...extra } })
      const [bad, ...goods] = await Promise.all([sleepy(1, { fail: true }), ...[2, 3, 4, 5].map((x) => sleepy(x))])
      expect(bad.status).toBe(500)
      expect(bad.body).toMatchObject({ code: 'PREDICTOR_FAILED' })
      expect(bad.body.error).toMatch(/failed on purpose/)
      goods.forEach((g, i) => expect(g.body.output.y).toBe((i + 2) * 2))
      const boom = await sleepy(1, { explode: true })
      expect(boom.status).toBe(500)
      expect(boom.body.error).toMatch(/exploded/)
      const schema = await sleepy(Number.NaN, { x: 'abc' })
      expect(schema.status).toBe(422)
      expect(schema.body.code).toBe('INVALID_INPUT')
      const oipSchema = await postJson(url('/v2/models/sleepy/infer'), {
        inputs: [{ name: 'x', datatype: 'BYTES', shape: [1], data: ['abc'] }],
      })
      expect(oipSchema.status).toBe(400)
      expect((await sleepy(21)).body.output.y).toBe(42)
    })

    it('bulk: many predictions in one call, in input order or streamed, a bad item failing alone', async () => {
      const inputs = [{ x: 1 }, { x: 'bad' }, { x: 3, fail: true }, { x: 4 }]
      const rep = await postJson(url('/models/sleepy/predictions/bulk'), { inputs })
      expect(rep.status).toBe(200)
      expect(rep.body).toMatchObject({ total: 4, succeeded: 2, failed: 2 })
      expect(rep.body.results.map((r: { index: number; status: string; code?: string }) => [r.index, r.status, r.code])).toEqual([
        [0, 'succeeded', undefined],
        [1, 'failed', 'INVALID_INPUT'],
        [2, 'failed', 'PREDICTOR_FAILED'],
        [3, 'succeeded', undefined],
      ])
      expect(rep.body.results[3].output.y).toBe(8)
      const nd = await fetch(url('/models/sleepy/predictions/bulk'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/x-ndjson' },
        body: JSON.stringify({ inputs: [{ x: 1, sleepMs: 300 }, { x: 2 }, { x: 3 }] }),
      })
      expect(nd.headers.get('content-type')).toContain('application/x-ndjson')
      const lines = (await nd.text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { index: number; output: { y: number } })
      expect(lines.map((l) => l.index).sort()).toEqual([0, 1, 2])
      for (const l of lines) {
        expect(l.output.y).toBe((l.index + 1) * 2)
      }
      const sse = await fetch(url('/models/sleepy/predictions/bulk'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ inputs: [{ x: 5 }] }),
      })
      const text = await sse.text()
      expect(text).toContain('event: prediction')
      expect(text).toContain('event: done')
      expect((await postJson(url('/models/sleepy/predictions/bulk'), { inputs: [] })).status).toBe(400)
      expect((await postJson(url('/models/nope/predictions/bulk'), { inputs: [{ x: 1 }] })).status).toBe(404)
    })

    it('answers 504 when the deadline is shorter than the model time (400 DEADLINE_TOO_SHORT once the learned time says so), and nothing hangs', async () => {
      const t0 = Date.now()
      const header = await postJson(url('/models/sleepy/predictions'), { input: { x: 1, sleepMs: 400 } }, { 'x-cohort-timeout-ms': '60' })
      // 504 when it ran out of time; 400 when the model's learned time for an item alone (earlier
      // tests' slow items, or a loaded machine) is already above 60 ms: refused before it ran.
      expect([
        [504, 'DEADLINE_EXCEEDED'],
        [400, 'DEADLINE_TOO_SHORT'],
      ]).toContainEqual([header.status, header.body.code])
      const param = await postJson(url('/v2/models/sleepy/infer'), {
        parameters: { timeout: 60_000 },
        inputs: [
          { name: 'x', datatype: 'FP64', shape: [1], data: [1] },
          { name: 'sleepMs', datatype: 'FP64', shape: [1], data: [400] },
        ],
      })
      expect([504, 400]).toContain(param.status)
      expect(Date.now() - t0).toBeLessThan(3000)
      expect((await postJson(url('/models/sleepy/predictions'), { input: { x: 2 } })).status).toBe(200)
    })

    it('drops the queued items of a client that went away', async () => {
      const before = metricSum(await env.workerMetrics(), 'cohort_worker_items_total{code="CANCELLED",model="sleepy"')
      // The aborted request must sit queued, whichever worker it reaches: so first make every worker
      // busy with a running batch. Blockers go one at a time (one pack each, so protocol v2 cannot
      // hand them all to one worker) until each worker holds one. Explicit deadlines: the queued
      // work is past the model's default SLO (docs/batching.md).
      const patient = { 'x-cohort-timeout-ms': '30000' }
      const perWorker = async () => (await env.workerMetrics()).split('# EOF').map((t) => metricSum(t, 'cohort_pending_requests{model="sleepy"'))
      const blockers: Promise<unknown>[] = []
      for (let i = 0; i < 24 && (await perWorker()).some((n) => n === 0); i++) {
        blockers.push(postJson(url('/models/sleepy/predictions'), { input: { x: i, sleepMs: 3000 } }, patient))
        await waitForPending(blockers.length)
      }
      expect((await perWorker()).every((n) => n > 0)).toBe(true)
      const held = blockers.length
      const ac = new AbortController()
      const gone = fetch(url('/models/sleepy/predictions'), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ input: { x: 99, sleepMs: 500 } }),
        signal: ac.signal,
      }).catch(() => 'aborted')
      // Abort only once the request sits in a worker (queued behind a running batch).
      await waitForPending(held + 1)
      ac.abort()
      expect(await gone).toBe('aborted')
      await Promise.all(blockers)
      const after = metricSum(await env.workerMetrics(), 'cohort_worker_items_total{code="CANCELLED",model="sleepy"')
      expect(after - before).toBeGreaterThanOrEqual(1)
    })

    it('drains on SIGTERM without losing in-flight requests, then answers 503 with no workers', async () => {
      const answered0 = metricSum(await env.workerMetrics(), 'cohort_worker_items_total{code="OK",model="sleepy"')
      const inflight = Array.from({ length: 40 }, (_, i) =>
        // An explicit deadline: this test is about draining, not the model's default SLO.
        postJson(url('/models/sleepy/predictions'), { input: { x: i, sleepMs: 150 } }, { 'x-cohort-timeout-ms': '30000' }),
      )
      // Stop a worker only once every request was accepted by some worker (queued, running or done).
      await vi.waitFor(
        async () => {
          const text = await env.workerMetrics()
          const accepted = metricSum(text, 'cohort_pending_requests{model="sleepy"') + metricSum(text, 'cohort_worker_items_total{code="OK",model="sleepy"') - answered0
          expect(accepted).toBeGreaterThanOrEqual(40)
        },
        { timeout: 10_000, interval: 10 },
      )
      await env.stopOneWorker()
      const replies = await Promise.all(inflight)
      replies.forEach((r, i) => {
        expect(r.status, JSON.stringify(r.body)).toBe(200)
        expect(r.body.output.y).toBe(i * 2)
      })
      await env.stopAllWorkers()
      const t0 = Date.now()
      const none = await postJson(url('/models/sleepy/predictions'), { input: { x: 1 } })
      expect(none.status).toBe(503)
      expect(none.body.code).toBe('NO_WORKER')
      expect(none.headers.get('retry-after')).toBe('1')
      expect(Date.now() - t0).toBeLessThan(1000)
    })
  })
}
