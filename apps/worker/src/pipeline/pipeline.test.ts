// Remote placement over the in-process transport: a pipeline host (PipelineRunner with
// RemoteStageRunners) and stage workers (StageServerRunner) in separate CohortWorkers.
import { afterEach, describe, expect, it } from 'vitest'
import { decodeReply, encodeRequest, subjects, type InferReply } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { Type, defineConfig, definePipeline, fromWireValue, stage, toWireValue, type ItemTensor } from '@cohort/pipeline'
import { itemError } from '@cohort/predictor'
import { CohortWorker } from '../worker.ts'
import { buildPipelineRunners } from './build.ts'

const workers: CohortWorker[] = []
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.drain()))
})

let ranLast = 0
const toTensor = stage<{ x: number }, { t: ItemTensor }>({
  name: 'totensor',
  run: (xs) => xs.map((i) => (i.x < 0 ? itemError('x must be >= 0', 'INVALID_INPUT') : { t: { datatype: 'FP32', shape: [2], data: new Float32Array([i.x, i.x * 2]) } })),
})
const sum = stage<{ t: ItemTensor }, { sum: number; kind: string }>({
  name: 'sum',
  run: (xs) => xs.map((i) => ({ sum: [...(i.t.data as Float32Array)].reduce((a, b) => a + b, 0), kind: i.t.data.constructor.name })),
})
const last = stage<{ sum: number; kind: string }, { sum: number; kind: string }>({
  name: 'last',
  run: async (xs) => {
    ranLast += xs.length
    return xs
  },
})
const loaded = {
  file: 'test',
  dir: '.',
  config: defineConfig({ models: [definePipeline({ name: 'p', input: Type.Object({ x: Type.Number() }), stages: [toTensor, sum, last] })] }),
}

async function infer(t: InProcessTransport, items: unknown[], deadline = Date.now() + 10_000): Promise<InferReply> {
  const req = encodeRequest({ v: 1, id: 'r1', model: 'p', deadline, items })
  return decodeReply(await t.request(subjects().infer('p'), req, { timeoutMs: 10_000 }))
}

async function startWorker(t: InProcessTransport, o: { stages?: string[]; remote?: string[] }) {
  const { runners, outputSchemas } = buildPipelineRunners({ loaded, transport: t, ...o })
  const w = new CohortWorker({ transport: t, runners, outputSchemas, heartbeatMs: 0 })
  await w.start()
  workers.push(w)
  return w
}

describe('pipelines in a worker', () => {
  it('wire values keep typed arrays (and their type) across a process boundary', () => {
    const v = { a: new Float32Array([1.5, 2]), b: [new BigInt64Array([3n])], c: new Uint8Array([7]), s: 'x' }
    const back = fromWireValue(toWireValue(v)) as typeof v
    expect(back.a).toBeInstanceOf(Float32Array)
    expect([...back.a]).toEqual([1.5, 2])
    expect(back.b[0]).toBeInstanceOf(BigInt64Array)
    expect(back.b[0]![0]).toBe(3n)
    expect(back.c).toBeInstanceOf(Uint8Array)
    expect(back.s).toBe('x')
  })

  it('fused and remote placement give identical outputs; a bad item fails alone in both', async () => {
    const fusedT = new InProcessTransport()
    await startWorker(fusedT, {})
    const remoteT = new InProcessTransport()
    await startWorker(remoteT, { stages: ['totensor', 'p.sum'] })
    await startWorker(remoteT, { stages: ['last'] })
    await startWorker(remoteT, { remote: ['totensor', 'sum', 'last'] })
    const items = [{ x: 1 }, { x: -1 }, { x: 2.5 }]
    const [a, b] = await Promise.all([infer(fusedT, items), infer(remoteT, items)])
    expect(a.items?.[0]).toEqual({ sum: 3, kind: 'Float32Array' })
    expect(a.items?.[2]).toEqual({ sum: 7.5, kind: 'Float32Array' })
    expect(a.errors?.[1]?.code).toBe('INVALID_INPUT')
    expect(b.items).toEqual(a.items)
    expect(b.errors).toEqual(a.errors)
    await Promise.all([fusedT.close(), remoteT.close()])
  })

  it('a remote stage without workers fails its items 503 NO_WORKER', async () => {
    const t = new InProcessTransport()
    await startWorker(t, { remote: ['sum'] })
    const r = await infer(t, [{ x: 1 }])
    expect(r.errors?.[0]?.code).toBe('NO_WORKER')
    await t.close()
  })

  it('a stage worker skips items already past their deadline (never runs them)', async () => {
    const t = new InProcessTransport()
    await startWorker(t, { stages: ['last'] })
    ranLast = 0
    const past = Date.now() - 1
    const req = encodeRequest({ v: 1, id: 's1', model: 'p.last', deadline: Date.now() + 5_000, items: [{ d: past, v: { sum: 1, kind: 'x' } }, { d: 0, v: { sum: 2, kind: 'y' } }] })
    const r = decodeReply(await t.request(subjects().stage('p', 'last'), req, { timeoutMs: 5_000 }))
    expect(r.errors?.[0]?.code).toBe('DEADLINE_EXCEEDED')
    expect(r.items?.[1]).toEqual({ sum: 2, kind: 'y' })
    expect(ranLast).toBe(1)
    await t.close()
  })

  it('stages are not announced as models; unknown stage names are refused', async () => {
    const t = new InProcessTransport()
    await startWorker(t, { stages: ['sum'] })
    expect(await t.directory.known('p.sum')).not.toBe(true)
    expect(() => buildPipelineRunners({ loaded, transport: t, stages: ['nope'] })).toThrow(/no stage "nope"/)
    await t.close()
  })
})
