import { describe, expect, it } from 'vitest'
import { CostModel } from './cost-model.ts'
import { BatchEngine } from './engine.ts'
import { FakeClock } from './fake-clock.ts'

describe('deadline policy: work-conserving probe', () => {
  it('runs the items with the most slack when a stale estimate dooms everything, so the model can recover', async () => {
    const clock = new FakeClock()
    const model = new CostModel()
    for (let i = 0; i < 10; i++) {
      model.observe(1, 100) // pessimistic: t(1) = 100 ms, older than the truth
    }
    const runs: number[][] = []
    const expired: [number, string][] = []
    const engine = new BatchEngine<number>({
      policy: 'deadline',
      maxBatchSize: 4,
      admission: false, // the probe at the head; admission lets the first arrival in anyway
      clock,
      costModel: model,
      run: (b) => {
        runs.push([...b.items])
        clock.advance(2) // the truth: 2 ms per batch
        return Promise.resolve()
      },
      expire: (v, r) => expired.push([v, r]),
    })
    const now = clock.now()
    engine.push({ value: 1, deadline: now + 20 })
    engine.push({ value: 2, deadline: now + 30 })
    engine.push({ value: 3, deadline: now - 1 }) // already late: expired, never run
    clock.flushDefers()
    await clock.settle()
    expect(runs.flat().sort()).toEqual([1, 2])
    expect(expired).toEqual([[3, 'deadline']])
    expect(model.samples).toBe(11)
    engine.close()
  })
})
