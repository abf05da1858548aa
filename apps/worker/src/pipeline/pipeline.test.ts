// Remote placement over the in-process transport: a pipeline host (PipelineRunner with
// RemoteStageRunners) and stage workers (StageServerRunner) in separate CohortWorkers.
import { afterEach, describe, expect, it } from 'vitest'
import { decodeReply, decodeRequest, encodeRequest, subjects, type InferReply, type InferRequest } from '@cohort/protocol'
import { InProcessTransport } from '@cohort/transport'
import { Type, decodeStageResults, defineConfig, definePipeline, fromWireValue, stage, toWireValue, type ItemTensor, type WireStagePart } from '@cohort/pipeline'
import { itemError } from '@cohort/predictor'
import { CohortWorker } from '../worker.ts'
import { buildPipelineRunners } from './build.ts'
import { RemoteStageRunner } from './remote-stage-runner.ts'

const workers: CohortWorker[] = []
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.drain()))
})

let ranLast = 0
const sumBatches: number[] = []
const toTensor = stage<{ x: number }, { t: ItemTensor }>({
  name: 'totensor',
  run: (xs) => xs.map((i) => (i.x < 0 ? itemError('x must be >= 0', 'INVALID_INPUT') : { t: { datatype: 'FP32', shape: [2], data: new Float32Array([i.x, i.x * 2]) } })),
})
const sum = stage<{ t: ItemTensor }, { sum: number; kind: string }>({
  name: 'sum',
  run: (xs, ctx) => (sumBatches.push(ctx.batchSize), xs.map((i) => ({ sum: [...(i.t.data as Float32Array)].reduce((a, b) => a + b, 0), kind: i.t.data.constructor.name }))),
})
const last = stage<{ sum: number; kind: string }, { sum: number; kind: string }>({
  name: 'last',
  run: (xs) => {
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

/** Record the stage requests sent on `t` (decoded), by stage subject. */
function recordStageRequests(t: InProcessTransport): Map<string, InferRequest[]> {
  const sent = new Map<string, InferRequest[]>()
  const request = t.request.bind(t)
  t.request = (subject, data, opts) => {
    if (subject.startsWith('cohort.stage.')) {
      ;(sent.get(subject) ?? sent.set(subject, []).get(subject)!).push(decodeRequest(data))
    }
    return request(subject, data, opts)
  }
  return sent
}

async function startWorker(t: InProcessTransport, o: { stages?: string[]; remote?: string[]; batching?: { maxBatchSize: number } }) {
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

  it('a remote stage batch is ONE message with one columnar part (one typed array per tensor field), queued as one entry and answered as one result', async () => {
    const t = new InProcessTransport()
    const sent = recordStageRequests(t)
    const sumWorker = await startWorker(t, { stages: ['sum'] })
    await startWorker(t, { remote: ['sum'] })
    const items = Array.from({ length: 30 }, (_, x) => ({ x })) // within the stage's maxBatchSize (32): one batch
    const r = await infer(t, items)
    expect(r.items).toEqual(items.map(({ x }) => ({ sum: 3 * x, kind: 'Float32Array' })))
    const reqs = sent.get(subjects().stage('p', 'sum')) ?? []
    expect(reqs).toHaveLength(1)
    expect(reqs[0]!.items).toHaveLength(1)
    const part = reqs[0]!.items![0] as WireStagePart & { b: { n: number; cols: Record<string, { k: string; b: Uint8Array }> } }
    expect(part.b.n).toBe(30)
    expect(part.b.cols['t']!.k).toBe('t')
    expect(part.b.cols['t']!.b.byteLength).toBe(30 * 2 * 4)
    // The stage worker queued the part as one entry and ran it as one batch of 30 items.
    const engine = sumWorker.servers[0]!.engine
    expect(engine.stats.batches).toBe(1)
    expect(engine.stats.items).toBe(1)
    await t.close()
  })

  it('stage batches handed over together travel in one message, one part each, and each gets its own results and errors', async () => {
    const t = new InProcessTransport()
    const sent = recordStageRequests(t)
    await startWorker(t, { stages: ['totensor'] })
    const r = new RemoteStageRunner({ transport: t, subjects: subjects(), pipeline: 'p', stage: 'totensor' })
    const ctx = (n: number) => ({ pipeline: 'p', stage: 'totensor', batchSize: n, deadlines: new Array<number>(n).fill(Date.now() + 5_000), signal: new AbortController().signal })
    const [a, b] = await Promise.all([r.run([{ x: 1 }, { x: -1 }], ctx(2)), r.run([{ x: 2 }], ctx(1))])
    expect(sent.get(subjects().stage('p', 'totensor'))?.map((q) => q.items?.length)).toEqual([2])
    expect((a[0] as { t: ItemTensor }).t.data).toEqual(new Float32Array([1, 2]))
    expect((a[1] as { code: string }).code).toBe('INVALID_INPUT')
    expect((b[0] as { t: ItemTensor }).t.data).toEqual(new Float32Array([2, 4]))
    await t.close()
  })

  it('a stage worker with a smaller batch size splits a host batch into batches it takes and merges the results in order', async () => {
    const t = new InProcessTransport()
    await startWorker(t, { stages: ['sum'], batching: { maxBatchSize: 4 } })
    await startWorker(t, { remote: ['sum'] })
    sumBatches.length = 0
    const items = Array.from({ length: 10 }, (_, x) => ({ x }))
    const r = await infer(t, items)
    expect(r.items).toEqual(items.map(({ x }) => ({ sum: 3 * x, kind: 'Float32Array' })))
    expect(sumBatches).toEqual([4, 4, 2])
    await t.close()
  })

  it('a malformed stage part fails alone with BAD_REQUEST; the other parts of its message run', async () => {
    const t = new InProcessTransport()
    await startWorker(t, { stages: ['last'] })
    const good = { d: 0, b: { n: 1, rows: [{ sum: 1, kind: 'x' }] } }
    const req = encodeRequest({ v: 1, id: 's2', model: 'p.last', deadline: Date.now() + 5_000, items: [{ d: 0, b: { n: 2, rows: [1] } }, good] })
    const r = decodeReply(await t.request(subjects().stage('p', 'last'), req, { timeoutMs: 5_000 }))
    expect(r.errors?.[0]?.code).toBe('BAD_REQUEST')
    expect(r.errors?.[0]?.message).toMatch(/2 rows expected/)
    expect(decodeStageResults(r.items?.[1], 1)).toEqual([{ sum: 1, kind: 'x' }])
    await t.close()
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
    const req = encodeRequest({
      v: 1,
      id: 's1',
      model: 'p.last',
      deadline: Date.now() + 5_000,
      items: [
        { d: past, v: { sum: 1, kind: 'x' } },
        { d: 0, v: { sum: 2, kind: 'y' } },
      ],
    })
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
