import { describe, expect, it } from 'vitest'
import { newPrediction } from '@cohort/predictions'
import type { InferenceDoor, PredictionCall } from '../door.ts'
import type { ItemOutcome } from '../door.ts'
import { MemoryJobs } from './memory.ts'

/** A door answering each prediction with the next of `outcomes` (the last one repeats), recording the calls. */
function door(outcomes: ItemOutcome[]) {
  const calls: PredictionCall[] = []
  const d = {
    predict(r: PredictionCall): Promise<ItemOutcome> {
      calls.push(r)
      return Promise.resolve(outcomes[Math.min(calls.length, outcomes.length) - 1] ?? { output: null })
    },
  }
  return { door: d as unknown as InferenceDoor, calls }
}

const overloaded: ItemOutcome = { error: { code: 'OVERLOADED', message: 'the model is busy' } }

async function run(jobs: MemoryJobs, id = 'p1') {
  await jobs.submit(newPrediction({ id, model: 'm', input: { x: 1 } }))
  return jobs.wait(id, 5_000)
}

describe('in-memory jobs', () => {
  it('a prediction refused for load waits and is tried again (not failed), its deferrals counted, under one deadline', async () => {
    const d = door([overloaded, overloaded, { output: { y: 2 } }])
    const jobs = new MemoryJobs(d.door, { deferDelayMs: 5, deferMaxDelayMs: 20 })
    const p = await run(jobs)
    expect(p).toMatchObject({ status: 'succeeded', output: { y: 2 }, deferrals: 2 })
    expect(d.calls).toHaveLength(3)
    expect(new Set(d.calls.map((c) => c.deadline)).size).toBe(1)
    await jobs.close()
  })

  it('a refusal that retrying cannot help (BAD_REQUEST) fails the prediction at once', async () => {
    const d = door([{ error: { code: 'BAD_REQUEST', message: 'x must be a number' } }])
    const jobs = new MemoryJobs(d.door, { deferDelayMs: 5 })
    expect(await run(jobs)).toMatchObject({ status: 'failed', error: expect.stringContaining('x must be a number') })
    expect(d.calls).toHaveLength(1)
    await jobs.close()
  })

  it('refused for load until its deadline: it fails then with the refusal, after more than one try', async () => {
    const d = door([overloaded])
    const jobs = new MemoryJobs(d.door, { timeoutMs: 150, deferDelayMs: 10, deferMaxDelayMs: 20 })
    const p = await run(jobs)
    expect(p).toMatchObject({ status: 'failed', error: expect.stringContaining('the model is busy') })
    expect(d.calls.length).toBeGreaterThan(1)
    await jobs.close()
  })

  it('a cancel during the wait ends the retries: canceled, no further try', async () => {
    const d = door([overloaded])
    const jobs = new MemoryJobs(d.door, { deferDelayMs: 60_000, deferMaxDelayMs: 60_000 })
    await jobs.submit(newPrediction({ id: 'p2', model: 'm', input: {} }))
    await new Promise((r) => setTimeout(r, 20))
    expect((await jobs.cancel('p2'))?.status).toBe('canceled')
    expect((await jobs.wait('p2', 1_000))?.status).toBe('canceled')
    expect(d.calls).toHaveLength(1)
    await jobs.close()
  })
})
