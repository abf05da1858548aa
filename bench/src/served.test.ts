import { Worker } from 'node:worker_threads'
import { describe, expect, it } from 'vitest'
import { mainAndBusiest, threadCpuSeconds } from './served.ts'

describe('per-thread CPU of a served process (/proc/<pid>/task)', () => {
  it('finds a spinning worker thread as the busiest, above an idle main thread', async () => {
    const spin = new Worker('const t = Date.now(); while (Date.now() - t < 1500) {}', { eval: true })
    await new Promise((resolve) => spin.once('online', resolve))
    const before = threadCpuSeconds(process.pid)
    await new Promise((resolve) => setTimeout(resolve, 600))
    const { main, busiest } = mainAndBusiest(process.pid, before, threadCpuSeconds(process.pid))
    await spin.terminate()
    // Clock ticks are 10 ms; the spinning thread gets at least a share of one core for 600 ms, even on a loaded machine.
    expect(busiest).toBeGreaterThan(0.1)
    expect(main).toBeLessThan(busiest)
  })

  it('names the main thread by the process id and takes the largest delta of the others', () => {
    const pid = 100
    const before = new Map([
      [100, 1.0],
      [101, 5.0],
      [102, 2.0],
    ])
    const after = new Map([
      [100, 1.25],
      [101, 5.5],
      [102, 2.75],
      [103, 0.5],
    ])
    expect(mainAndBusiest(pid, before, after)).toEqual({ main: 0.25, busiest: 0.75, busiestTid: 102 })
  })
})
