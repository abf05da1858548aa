// The worker's learned batch cost converges to a synthetic model's true cost t(b) = a + c*b.
import { afterAll, describe, expect, it } from 'vitest'
import { Registry, parsePrometheus } from '@cohort/metrics'
import { Type, definePredictor } from '@cohort/predictor'
import { encodeRequest, decodeReply, subjects } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, PredictorRunner } from '@cohort/worker'

const A_MS = 20
// c dominates t(b) over the sizes sent (t(1) = 30 ms, t(32) = 340 ms), so that the tens of ms a
// loaded machine adds to some batches cannot hide the slope.
const C_MS = 10

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
    // Sleeps never end early; a loaded machine makes some end late, by tens of ms, whatever their
    // size: that lands mostly in a, little in c (the sizes span 31 items, 310 ms of c). So c is
    // checked within a factor of 2 and a only against a wide ceiling (on a machine at load 20, a was learned as 100 ms once); the exact fit is for a
    // benchmark, not this test.
    expect(c).toBeGreaterThan(C_MS * 0.5)
    expect(c).toBeLessThan(C_MS * 2)
    expect(a).toBeGreaterThanOrEqual(0)
    expect(a, 'a does not absorb the per-item cost (t(32) is 340 ms)').toBeLessThan(A_MS + 250)
    // The learned model never prices a batch well under its true cost.
    for (const b of [1, 32]) {
      expect(a + b * c, `t(${b})`).toBeGreaterThan(0.8 * (A_MS + b * C_MS))
    }
  })
})
