// The worker's learned batch cost converges to a synthetic model's true cost t(b) = a + c*b.
import { afterAll, describe, expect, it } from 'vitest'
import { Registry, parsePrometheus } from '@cohort/metrics'
import { Type, definePredictor } from '@cohort/predictor'
import { encodeRequest, decodeReply, subjects } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'

const A_MS = 20
const C_MS = 2

const synthetic = definePredictor({
  name: 'affine',
  input: Type.Object({ x: Type.Number() }),
  batch: { maxBatchSize: 64 },
  async predict(inputs) {
    await new Promise((r) => setTimeout(r, A_MS + C_MS * inputs.length))
    return inputs.map((i) => i.x)
  },
})

describe('cost model on a sleep-based synthetic predictor', () => {
  const transport = new InProcessTransport()
  const registry = new Registry()
  const worker = new CohortWorker({ transport, registry, runners: [new PredictorRunner(synthetic)], capacityAware: false })
  afterAll(async () => {
    await worker.close()
    await transport.close()
  })

  it('estimates a and c of t(b) = a + c*b from measured service times', async () => {
    await worker.start()
    const s = subjects()
    // Requests of 1..32 items, one at a time: each runs as one batch of that size.
    for (let round = 0; round < 2; round++) {
      for (const n of [1, 4, 8, 16, 24, 32]) {
        const req = { v: 1 as const, id: `r${round}-${n}`, model: 'affine', deadline: Date.now() + 5000, items: Array.from({ length: n }, (_, x) => ({ x })) }
        const r = decodeReply(await transport.request(s.infer('affine'), encodeRequest(req), { timeoutMs: 5000 }))
        expect(r.items).toHaveLength(n)
      }
    }
    const m = parsePrometheus(registry.render())
    const a = (m.get('cohort_cost_model_a_seconds{model="affine"}') ?? NaN) * 1000
    const c = (m.get('cohort_cost_model_c_seconds{model="affine"}') ?? NaN) * 1000
    console.log(`true a=${A_MS} ms c=${C_MS} ms; learned a=${a.toFixed(2)} ms c=${c.toFixed(3)} ms`)
    // The last batch is recorded just after its reply goes out.
    expect(m.get('cohort_cost_model_samples{model="affine"}')).toBeGreaterThanOrEqual(11)
    // Sleeps never end early, and a loaded machine only makes them end late: by about the same
    // few ms for every batch size, which lands in a, barely in c (the sizes span 31 items). So the
    // floors are tight and the ceilings wide; the exact fit is for a benchmark, not for this test.
    expect(a).toBeGreaterThan(A_MS * 0.8)
    expect(a).toBeLessThan(A_MS * 4)
    expect(c).toBeGreaterThan(C_MS * 0.5)
    expect(c).toBeLessThan(C_MS * 2)
    // The learned model orders batch costs like the true one: t(32) well above t(1).
    expect(a + 32 * c).toBeGreaterThan(0.8 * (A_MS + 32 * C_MS))
  })
})
