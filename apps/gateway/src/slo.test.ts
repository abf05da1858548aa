// The server-side SLO through the HTTP door: a real CohortWorker announces its model's SLO in
// model metadata and the door applies it to requests whose client sends no deadline.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Type, definePredictor } from '@cohort/predictor'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'
import { decodeRequest } from '@cohort/protocol'
import { createApp } from './app.ts'
import { ModelSlos } from './slo.ts'

const echo = definePredictor({
  name: 'echo',
  input: Type.Object({ x: Type.Number() }),
  batch: { maxBatchSize: 8, maxDelayMs: 0 },
  predict: (xs) => xs.map((v) => v.x),
})

describe('server-side SLO at the door', () => {
  const transport = new InProcessTransport()
  const worker = new CohortWorker({ transport, runners: [new PredictorRunner(echo)], batching: { sloMs: 400 } })
  const app = createApp({ transport, workerLoss: false })
  /** Budget (deadline - send time, ms) of every inference envelope sent. */
  const budgets: number[] = []
  const request = transport.request.bind(transport)
  transport.request = (subject, data, opts) => {
    if (subject.includes('echo') && data.byteLength > 0) {
      try {
        const req = decodeRequest(data)
        budgets.push(req.deadline - Date.now())
      } catch {
        // not an inference envelope
      }
    }
    return request(subject, data, opts)
  }
  const post = (body: unknown, headers: Record<string, string> = {}) =>
    app.request('/v2/models/echo/infer', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    })
  const oip = { inputs: [{ name: 'x', datatype: 'FP64', shape: [1], data: [1] }] }

  beforeAll(async () => {
    await worker.start()
  })
  afterAll(async () => {
    await worker.drain()
    await transport.close()
  })

  it('announces the SLO in model metadata', () => {
    expect(worker.models()[0]?.slo).toEqual({ ms: 400, source: 'configured' })
  })

  it('gives a request without a client deadline the announced SLO, not the 30 s default', async () => {
    budgets.length = 0
    const r = await post(oip)
    expect(r.status, await r.text()).toBe(200)
    expect(budgets).toHaveLength(1)
    expect(budgets[0]).toBeGreaterThan(0)
    expect(budgets[0]).toBeLessThanOrEqual(400)
  })

  it('lets a client deadline shorten or lengthen it, up to requestTimeoutMs', async () => {
    budgets.length = 0
    expect((await post(oip, { 'x-cohort-timeout-ms': '150' })).status).toBe(200)
    expect((await post(oip, { 'x-cohort-timeout-ms': '5000' })).status).toBe(200)
    expect((await post(oip, { 'x-cohort-timeout-ms': '90000' })).status).toBe(200)
    expect(budgets[0]).toBeLessThanOrEqual(150)
    expect(budgets[1]).toBeGreaterThan(400)
    expect(budgets[1]).toBeLessThanOrEqual(5000)
    expect(budgets[2]).toBeGreaterThan(5000)
    expect(budgets[2]).toBeLessThanOrEqual(30_000)
  })

  it('follows a runtime change of sloMs', () => {
    worker.configure({ sloMs: 0 })
    const slo = worker.models()[0]!.slo!
    expect(['cold', 'derived']).toContain(slo.source)
    expect(slo.ms).toBeLessThan(30_000)
    worker.configure({ sloMs: 400 })
  })
})

describe('ModelSlos', () => {
  it('caches an announced SLO for ttlMs, then asks again; a failed ask keeps the last value', async () => {
    let now = 0
    let calls = 0
    let answer: () => Promise<{ slo?: { ms: number; source: string } }> = () => Promise.resolve({ slo: { ms: 250, source: 'derived' } })
    const slos = new ModelSlos(
      () => {
        calls++
        return answer()
      },
      1000,
      () => now,
    )
    expect(slos.peek('m')).toBeUndefined()
    expect(slos.has('m')).toBe(false)
    expect(await slos.get('m')).toBe(250)
    expect(slos.has('m')).toBe(true)
    expect(await slos.get('m')).toBe(250)
    expect(calls).toBe(1)
    now = 1500
    answer = () => Promise.reject(new Error('no worker'))
    expect(await slos.get('m')).toBe(250)
    expect(calls).toBe(2)
    answer = () => Promise.resolve({})
    now = 1600
    expect(await slos.get('m')).toBeUndefined()
    // A worker answered "none": known, so the door takes it from peek() without waiting.
    expect(slos.has('m')).toBe(true)
    expect(slos.peek('m')).toBeUndefined()
  })
})
