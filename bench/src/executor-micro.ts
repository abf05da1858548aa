/**
 * Micro-bench of the pipeline executor's own overhead: three identity TS stages, `inflight` calls
 * of `batch` items each in flight; CPU µs per call (process.cpuUsage, the stages do no work).
 * Run: node --import tsx bench/src/executor-micro.ts [batch=512] [inflight=4] [calls=2000]
 * @module
 */
import { PipelineExecutor, Type, definePipeline, stage } from '@cohort/pipeline'

async function main(): Promise<void> {
  const [batch = 512, inflight = 4, calls = 2000] = process.argv.slice(2).map(Number)
  const p = definePipeline({
    name: 'micro',
    input: Type.Object({ x: Type.Number() }),
    stages: ['a', 'b', 'c'].map((name) => stage({ name, batch: { maxBatchSize: batch * inflight, maxDelayMs: 0 }, run: (xs: unknown[]) => xs })),
  })
  const ex = new PipelineExecutor({ pipeline: p })
  await ex.start()
  const inputs = Array.from({ length: batch }, (_, i) => ({ x: i }))
  const go = async (n: number): Promise<void> => {
    const lanes = Array.from({ length: inflight }, async () => {
      for (let i = 0; i < n / inflight; i++) {
        await ex.runMany(inputs, Infinity)
      }
    })
    await Promise.all(lanes)
  }
  await go(calls / 4)
  const c0 = process.cpuUsage()
  await go(calls)
  const c = process.cpuUsage(c0)
  const batches = ['a', 'b', 'c'].map((s) => ex.stage(s).engine.stats.batches)
  console.log(JSON.stringify({ batch, inflight, calls, cpuUsPerCall: Math.round((c.user + c.system) / calls), batches }))
  await ex.close()
}

await main()
