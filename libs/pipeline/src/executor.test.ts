import { FakeClock, realClock } from '@cohort/batching'
import { Registry, parsePrometheus } from '@cohort/metrics'
import { ItemError, itemError } from '@cohort/predictor'
import { Type } from '@sinclair/typebox'
import { describe, expect, it } from 'vitest'
import { definePipeline, fanOut, onnxStage, stage } from './define.ts'
import { PipelineExecutor } from './executor.ts'
import { pipelineMetrics } from './metrics.ts'
import type { StageRunner } from './stage-queue.ts'
import type { ItemTensor } from './types.ts'

const input = Type.Object({ x: Type.Number() })

/** A runner whose batches finish only when the test says so. */
function gatedRunner(fn: (items: unknown[]) => unknown[]) {
  const calls: unknown[][] = []
  const gates: (() => void)[] = []
  const runner: StageRunner = {
    concurrency: 1,
    run: (items) => {
      calls.push(items)
      return new Promise((resolve) => gates.push(() => resolve(fn(items))))
    },
  }
  return { runner, calls, open: () => gates.splice(0).forEach((g) => g()) }
}

describe('PipelineExecutor', () => {
  it('runs stages in order, batches each stage on its own and keeps results per item', async () => {
    const sizes: Record<string, number[]> = { double: [], inc: [] }
    const p = definePipeline({
      name: 'p',
      input,
      stages: [
        stage<{ x: number }, number>({ name: 'double', run: (xs, ctx) => (sizes['double']!.push(ctx.batchSize), xs.map((i) => i.x * 2)) }),
        stage<number, { y: number }>({ name: 'inc', run: (xs, ctx) => (sizes['inc']!.push(ctx.batchSize), xs.map((v) => ({ y: v + 1 }))) }),
      ],
    })
    const clock = new FakeClock(1000)
    const ex = new PipelineExecutor({ pipeline: p, clock })
    await ex.start()
    const out = [1, 2, 3].map((x) => ex.run({ x }, Infinity))
    await clock.settle()
    expect(await Promise.all(out)).toEqual([{ y: 3 }, { y: 5 }, { y: 7 }])
    expect(sizes).toEqual({ double: [3], inc: [3] })
    await ex.close()
    await ex.close()
  })

  it('fails a bad item alone; the rest of its batch succeeds', async () => {
    const p = definePipeline({
      name: 'p',
      input,
      stages: [
        stage<{ x: number }, number>({
          name: 'check',
          run: (xs) => xs.map((i) => (i.x < 0 ? itemError('x must be >= 0', 'INVALID_INPUT') : i.x)),
        }),
        stage<number, number>({ name: 'sqrt', run: (xs) => xs.map(Math.sqrt) }),
      ],
    })
    const clock = new FakeClock()
    const ex = new PipelineExecutor({ pipeline: p, clock })
    const out = [4, -1, 9].map((x) => ex.run({ x }, Infinity))
    await clock.settle()
    const [a, b, c] = await Promise.all(out)
    expect([a, c]).toEqual([2, 3])
    expect(b).toBeInstanceOf(ItemError)
    expect((b as ItemError).code).toBe('INVALID_INPUT')
    expect(ex.stage('sqrt').ran).toBe(2)
  })

  it('a throwing batch fails every item of that batch with PREDICTOR_FAILED, and later batches run', async () => {
    let n = 0
    const p = definePipeline({
      name: 'p',
      input,
      stages: [
        stage<{ x: number }, number>({
          name: 's',
          run: (xs) =>
            n++ === 0
              ? (() => {
                  throw new Error('boom')
                })()
              : xs.map((i) => i.x),
        }),
      ],
    })
    const clock = new FakeClock()
    const ex = new PipelineExecutor({ pipeline: p, clock })
    const first = [ex.run({ x: 1 }, Infinity), ex.run({ x: 2 }, Infinity)]
    await clock.settle()
    for (const r of await Promise.all(first)) {
      expect((r as ItemError).code).toBe('PREDICTOR_FAILED')
    }
    const second = ex.run({ x: 3 }, Infinity)
    await clock.settle()
    expect(await second).toBe(3)
  })

  it('overlaps stages: stage 1 runs batch k+1 while stage 2 still runs batch k', async () => {
    const s1 = gatedRunner((xs) => xs)
    const s2 = gatedRunner((xs) => xs)
    const p = definePipeline({
      name: 'p',
      input,
      stages: [stage({ name: 'a', run: (xs) => xs }), stage({ name: 'b', run: (xs) => xs })],
    })
    const clock = new FakeClock()
    const ex = new PipelineExecutor({ pipeline: p, clock, runnerFor: (s) => (s.name === 'a' ? s1.runner : s2.runner) })
    const k = [ex.run({ x: 1 }, Infinity)]
    await clock.settle()
    s1.open() // batch k leaves stage a
    await clock.settle()
    expect(s2.calls).toHaveLength(1) // batch k runs in stage b ...
    const k1 = [ex.run({ x: 2 }, Infinity), ex.run({ x: 3 }, Infinity)]
    await clock.settle()
    expect(s1.calls).toHaveLength(2) // ... while stage a already runs batch k+1
    expect(s1.calls[1]).toEqual([{ x: 2 }, { x: 3 }])
    s2.open()
    s1.open()
    await clock.settle()
    s2.open()
    await clock.settle()
    expect(await Promise.all([...k, ...k1])).toEqual([{ x: 1 }, { x: 2 }, { x: 3 }])
  })

  it('answers DEADLINE_EXCEEDED when the deadline passes in a stage, without running later stages', async () => {
    const s1 = gatedRunner((xs) => xs)
    let laterRan = 0
    const p = definePipeline({
      name: 'p',
      input,
      stages: [stage({ name: 'slow', run: (xs) => xs }), stage({ name: 'later', run: (xs) => ((laterRan += xs.length), xs) })],
    })
    const clock = new FakeClock(0)
    const ex = new PipelineExecutor({ pipeline: p, clock, runnerFor: (s) => (s.name === 'slow' ? s1.runner : undefined) })
    const r = ex.run({ x: 1 }, 100)
    await clock.settle()
    clock.advance(150)
    s1.open()
    await clock.settle()
    const out = await r
    expect((out as ItemError).code).toBe('DEADLINE_EXCEEDED')
    expect(laterRan).toBe(0)
    expect(ex.stage('later').ran).toBe(0)
  })

  it('expires items whose deadline passes while queued behind a busy stage (never run)', async () => {
    const s1 = gatedRunner((xs) => xs)
    const p = definePipeline({ name: 'p', input, stages: [stage({ name: 'a', run: (xs) => xs })] })
    const clock = new FakeClock(0)
    const ex = new PipelineExecutor({ pipeline: p, clock, runnerFor: () => s1.runner })
    const first = ex.run({ x: 1 }, Infinity)
    await clock.settle()
    const late = ex.run({ x: 2 }, 50) // queued while batch 1 runs
    await clock.settle()
    clock.advance(60)
    await clock.settle()
    expect(((await late) as ItemError).code).toBe('DEADLINE_EXCEEDED')
    s1.open()
    await clock.settle()
    expect(await first).toEqual({ x: 1 })
    expect(s1.calls).toEqual([[{ x: 1 }]])
  })

  it('the pipeline deadlineMs tightens a looser request deadline', async () => {
    const s1 = gatedRunner((xs) => xs)
    const p = definePipeline({ name: 'p', input, deadlineMs: 20, stages: [stage({ name: 'a', run: (xs) => xs }), stage({ name: 'b', run: (xs) => xs })] })
    const clock = new FakeClock(0)
    const ex = new PipelineExecutor({ pipeline: p, clock, runnerFor: (s) => (s.name === 'a' ? s1.runner : undefined) })
    const r = ex.run({ x: 1 }, 10_000)
    await clock.settle()
    clock.advance(25)
    s1.open()
    await clock.settle()
    expect(((await r) as ItemError).code).toBe('DEADLINE_EXCEEDED')
  })

  it('fans out: sub-items of several items share batches, merge sees per-part errors', async () => {
    const sizes: number[] = []
    const p = definePipeline({
      name: 'p',
      input: Type.Object({ words: Type.Array(Type.String()) }),
      stages: [
        fanOut<{ words: string[] }, string, string, string[]>({
          name: 'each',
          split: (i) => i.words,
          stage: stage<string, string>({
            name: 'upper',
            run: (ws) => (sizes.push(ws.length), ws.map((w) => (w === 'bad' ? itemError('bad word', 'INVALID_INPUT') : w.toUpperCase()))),
          }),
          merge: (_i, rs) => rs.map((r) => (r instanceof Error ? `!${r.message}` : r)),
        }),
      ],
    })
    const clock = new FakeClock()
    const ex = new PipelineExecutor({ pipeline: p, clock })
    const out = [ex.run({ words: ['a', 'b'] }, Infinity), ex.run({ words: ['c', 'bad', 'd'] }, Infinity), ex.run({ words: [] }, Infinity)]
    await clock.settle()
    expect(await Promise.all(out)).toEqual([['A', 'B'], ['C', '!bad word', 'D'], []])
    expect(sizes).toEqual([5])
  })

  it('ONNX stages group items by tensor shape: different shapes never share a batch', async () => {
    const batches: unknown[][] = []
    const runner: StageRunner = {
      concurrency: 1,
      run: (items) => {
        batches.push(items)
        return Promise.resolve(items)
      },
    }
    const t = (n: number) => ({ x: { datatype: 'FP32' as const, shape: [n], data: new Float32Array(n) } })
    const p = definePipeline({ name: 'p', input, stages: [onnxStage({ name: 'm', model: 'm.onnx' })] })
    const clock = new FakeClock()
    const ex = new PipelineExecutor({ pipeline: p, clock, runnerFor: () => runner })
    const out = [ex.run(t(2), Infinity), ex.run(t(3), Infinity), ex.run(t(2), Infinity)]
    await clock.settle()
    await Promise.all(out)
    expect(batches.map((b) => b.length).sort()).toEqual([1, 2])
  })

  it('records per-stage metrics (batch size, compute, items by code, queue depth)', async () => {
    const r = new Registry()
    const p = definePipeline({
      name: 'p',
      input,
      stages: [stage<{ x: number }, number>({ name: 'a', run: (xs) => xs.map((i) => (i.x < 0 ? itemError('neg', 'INVALID_INPUT') : i.x)) })],
    })
    const clock = new FakeClock()
    const ex = new PipelineExecutor({ pipeline: p, clock, metrics: pipelineMetrics(r) })
    const out = [1, -1, 2].map((x) => ex.run({ x }, Infinity))
    await clock.settle()
    await Promise.all(out)
    const m = parsePrometheus(r.render())
    expect(m.get('cohort_stage_batch_size_count{pipeline="p",stage="a"}')).toBe(1)
    expect(m.get('cohort_stage_batch_size_sum{pipeline="p",stage="a"}')).toBe(3)
    expect(m.get('cohort_stage_items_total{code="OK",pipeline="p",stage="a"}')).toBe(2)
    expect(m.get('cohort_stage_items_total{code="INVALID_INPUT",pipeline="p",stage="a"}')).toBe(1)
    expect(m.get('cohort_stage_queue_depth{pipeline="p",stage="a"}')).toBe(0)
    expect(m.get('cohort_stage_compute_duration_seconds_count{pipeline="p",stage="a"}')).toBe(1)
  })

  it('close answers queued items SHUTTING_DOWN and is idempotent', async () => {
    const s1 = gatedRunner((xs) => xs)
    const p = definePipeline({ name: 'p', input, stages: [stage({ name: 'a', run: (xs) => xs })] })
    const clock = new FakeClock()
    const ex = new PipelineExecutor({ pipeline: p, clock, runnerFor: () => s1.runner })
    const running = ex.run({ x: 1 }, Infinity)
    await clock.settle()
    const queued = ex.run({ x: 2 }, Infinity)
    await clock.settle()
    const closing = ex.close()
    expect(((await queued) as ItemError).code).toBe('SHUTTING_DOWN')
    s1.open()
    await closing
    expect(await running).toEqual({ x: 1 })
    expect(ex.close()).toBe(closing)
  })

  it('runMany: a large request travels in chunks of at most maxBatchSize, a bad item fails alone', async () => {
    const sizes: number[] = []
    const p = definePipeline({
      name: 'p',
      input,
      stages: [
        stage<{ x: number }, number>({
          name: 'a',
          batch: { maxBatchSize: 64 },
          run: (xs) => (sizes.push(xs.length), xs.map((i) => (i.x === 7 ? itemError('seven', 'INVALID_INPUT') : i.x))),
        }),
        stage<number, number>({ name: 'b', batch: { maxBatchSize: 1000 }, run: (xs) => (sizes.push(-xs.length), xs.map((x) => x * 10)) }),
      ],
    })
    const clock = new FakeClock()
    const ex = new PipelineExecutor({ pipeline: p, clock })
    const all = ex.runMany(
      Array.from({ length: 200 }, (_, x) => ({ x })),
      Infinity,
    )
    await clock.settle()
    const out = await all
    expect(out).toHaveLength(200)
    expect((out[7] as ItemError).code).toBe('INVALID_INPUT')
    expect(out.filter((r) => r instanceof Error)).toHaveLength(1)
    expect(out[199]).toBe(1990)
    expect(sizes.filter((n) => n > 0).every((n) => n <= 64)).toBe(true)
    expect(sizes.filter((n) => n > 0).reduce((a, b) => a + b, 0)).toBe(200)
    expect(-sizes.filter((n) => n < 0).reduce((a, b) => a + b, 0)).toBe(199)
  })

  it('a stage with cost() batches by cost units (maxBatchCost), items queued one by one', async () => {
    const batches: string[][] = []
    const p = definePipeline({
      name: 'p',
      input: Type.String(),
      stages: [stage<string, number>({ name: 'len', cost: (w) => w.length, run: (ws) => (batches.push(ws), ws.map((w) => w.length)) })],
    })
    const clock = new FakeClock()
    const ex = new PipelineExecutor({ pipeline: p, clock, batching: { maxBatchCost: 10 } })
    const all = ex.runMany(['aaaa', 'bbbb', 'cccc', 'dddddddddddd', 'e'], Infinity)
    await clock.settle()
    expect(await all).toEqual([4, 4, 4, 12, 1])
    for (const b of batches) {
      expect(b.length === 1 || b.reduce((a, w) => a + w.length, 0) <= 10).toBe(true)
    }
    expect(batches.length).toBeGreaterThan(1)
  })

  it('fanOut: a split that throws fails that item alone', async () => {
    const p = definePipeline({
      name: 'p',
      input,
      stages: [
        fanOut<{ x: number }, number, number, number>({
          name: 'f',
          split: (i) => {
            if (i.x < 0) {
              throw new Error('cannot split')
            }
            return [i.x, i.x]
          },
          stage: stage<number, number>({ name: 'dbl', run: (xs) => xs.map((x) => 2 * x) }),
          merge: (_i, rs) => (rs as number[]).reduce((a, b) => a + b, 0),
        }),
      ],
    })
    const clock = new FakeClock()
    const ex = new PipelineExecutor({ pipeline: p, clock })
    const all = ex.runMany([{ x: 1 }, { x: -1 }, { x: 3 }], Infinity)
    await clock.settle()
    const [a, b, c] = await all
    expect([a, c]).toEqual([4, 12])
    expect((b as ItemError).code).toBe('PREDICTOR_FAILED')
  })
})

describe('PipelineExecutor, fused pass-through', () => {
  it('a batch reaching idle stages crosses them in one pass: one batch per stage, no queue entry, no deferred turn, the same tensors', async () => {
    let defers = 0
    const clock = {
      ...realClock,
      defer: (fn: () => void) => {
        defers++
        realClock.defer(fn)
      },
    }
    const seen: { stage: string; items: unknown[] }[] = []
    const made: Float32Array[] = []
    const runner = (name: string, fn: (items: unknown[]) => unknown[]): StageRunner => ({
      concurrency: 1,
      run: (items) => {
        seen.push({ stage: name, items })
        return Promise.resolve(fn(items))
      },
    })
    const p = definePipeline({
      name: 'p',
      input,
      stages: [
        stage<{ x: number }, { input: ItemTensor }>({ name: 'pre', run: () => [] }),
        onnxStage({ name: 'model', model: 'm.onnx' }),
        stage<{ y: ItemTensor }, number>({ name: 'post', run: () => [] }),
      ],
    })
    const ex = new PipelineExecutor({
      pipeline: p,
      clock,
      batching: { maxBatchSize: 256 },
      runnerFor: (s) =>
        s.name === 'pre'
          ? runner('pre', (xs) =>
              xs.map((i) => {
                const data = Float32Array.of((i as { x: number }).x)
                made.push(data)
                return { input: { datatype: 'FP32', shape: [1], data } }
              }),
            )
          : s.name === 'model'
            ? runner('model', (xs) => xs.map((i) => ({ y: (i as { input: ItemTensor }).input })))
            : runner('post', (xs) => xs.map((i) => ((i as { y: ItemTensor }).y.data as Float32Array)[0]! * 10)),
    })
    await ex.start()
    const inputs = Array.from({ length: 100 }, (_, x) => ({ x }))
    const out = await ex.runMany(inputs, Infinity)
    expect(out).toEqual(inputs.map(({ x }) => x * 10))
    expect(defers).toBe(0)
    expect(seen.map((s) => [s.stage, s.items.length])).toEqual([
      ['pre', 100],
      ['model', 100],
      ['post', 100],
    ])
    for (const name of ['pre', 'model', 'post']) {
      const q = ex.stage(name)
      expect(q.passes).toEqual({ direct: 1, queued: 0, held: 0 })
      expect(q.engine.stats.batches).toBe(1)
    }
    // The model stage got the very tensors pre made (no copy), and post the very tensors the model gave.
    const modelItems = seen[1]!.items as { input: ItemTensor }[]
    modelItems.forEach((it, k) => expect(it.input.data).toBe(made[k]))
    const postItems = seen[2]!.items as { y: ItemTensor }[]
    postItems.forEach((it, k) => expect(it.y.data).toBe(made[k]))
    await ex.close()
  })

  it('requests arriving together share the pass; a busy stage queues them and batches them as before', async () => {
    const g = gatedRunner((xs) => xs)
    const sizes: number[] = []
    const p = definePipeline({
      name: 'p',
      input,
      stages: [stage<{ x: number }, number>({ name: 'a', run: () => [] }), stage<number, number>({ name: 'b', run: (xs, ctx) => (sizes.push(ctx.batchSize), xs) })],
    })
    const ex = new PipelineExecutor({ pipeline: p, runnerFor: (s) => (s.name === 'a' ? g.runner : undefined) })
    const first = [ex.run({ x: 1 }, Infinity), ex.run({ x: 2 }, Infinity)]
    await new Promise((r) => setImmediate(r))
    expect(g.calls).toEqual([[{ x: 1 }, { x: 2 }]]) // two requests of one turn: one direct batch
    const later = [3, 4, 5].map((x) => ex.run({ x }, Infinity)) // stage a busy: queued
    await new Promise((r) => setImmediate(r))
    expect(ex.stage('a').passes).toEqual({ direct: 1, queued: 3, held: 0 })
    g.open()
    await Promise.all(first)
    await new Promise((r) => setImmediate(r))
    g.open()
    await Promise.all(later)
    expect(g.calls.map((c) => c.length)).toEqual([2, 3])
    expect(sizes).toEqual([2, 3])
    await ex.close()
  })
})

describe('PipelineExecutor, backpressure and instances', () => {
  /** a (fast) -> b (gated): each batch one item. */
  function twoStages(bFlow: { maxInflight?: number }) {
    const g = gatedRunner((xs) => xs)
    const inflightSeen: number[] = []
    const p = definePipeline({
      name: 'p',
      input,
      stages: [
        stage<{ x: number }, number>({ name: 'a', batch: { maxBatchSize: 1 }, run: (xs) => xs.map((i) => i.x) }),
        stage<number, number>({ name: 'b', batch: { maxBatchSize: 1 }, ...bFlow, run: () => [] }),
      ],
    })
    const ex: PipelineExecutor = new PipelineExecutor({
      pipeline: p,
      runnerFor: (s) =>
        s.name === 'b' ? { concurrency: 1, run: (items, ctx): Promise<unknown[]> => (inflightSeen.push(ex.stage('b').inflight), g.runner.run(items, ctx)) } : undefined,
    })
    return { ex, g, inflightSeen }
  }
  const turns = async (n = 20) => {
    for (let i = 0; i < n; i++) {
      await new Promise((r) => setImmediate(r))
    }
  }

  it('a stage waits to start its next batch while the next stage holds maxInflight batches; nothing is refused, and it resumes as that stage drains', async () => {
    const { ex, g, inflightSeen } = twoStages({ maxInflight: 2 })
    const all = Promise.all([1, 2, 3, 4, 5, 6].map((x) => ex.run({ x }, Infinity)))
    await turns()
    // b runs item 1 and holds item 2 queued: a has run 2 items and its third batch waits for room.
    expect(ex.stage('a').ran).toBe(2)
    expect(ex.stage('a').passes.held).toBe(1)
    expect(ex.stage('b').inflight).toBe(2)
    for (let i = 0; i < 6; i++) {
      g.open()
      await turns()
    }
    expect(await all).toEqual([1, 2, 3, 4, 5, 6])
    expect(Math.max(...inflightSeen)).toBeLessThanOrEqual(2)
    expect(ex.stage('b').inflight).toBe(0)
    await ex.close()
  })

  it('without a bound (the default), the earlier stage runs ahead and the next stage queues everything', async () => {
    const { ex, g } = twoStages({})
    const all = Promise.all([1, 2, 3, 4, 5, 6].map((x) => ex.run({ x }, Infinity)))
    await turns()
    expect(ex.stage('a').ran).toBe(6)
    expect(ex.stage('b').inflight).toBe(6)
    for (let i = 0; i < 6; i++) {
      g.open()
      await turns()
    }
    expect(await all).toEqual([1, 2, 3, 4, 5, 6])
    await ex.close()
  })

  it('an item waiting for room past its deadline is answered DEADLINE_EXCEEDED and never run by the waiting stage', async () => {
    const seenByA: number[] = []
    const g = gatedRunner((xs) => xs)
    const p = definePipeline({
      name: 'p',
      input,
      stages: [
        stage<{ x: number }, number>({ name: 'a', batch: { maxBatchSize: 1 }, run: (xs) => xs.map((i) => (seenByA.push(i.x), i.x)) }),
        stage<number, number>({ name: 'b', batch: { maxBatchSize: 1 }, maxInflight: 1, run: () => [] }),
      ],
    })
    const ex = new PipelineExecutor({ pipeline: p, runnerFor: (s) => (s.name === 'b' ? g.runner : undefined) })
    const first = ex.run({ x: 1 }, Infinity) // b runs it and never finishes until opened
    await turns()
    const late = await ex.run({ x: 2 }, Date.now() + 30)
    expect((late as ItemError).code).toBe('DEADLINE_EXCEEDED')
    expect((late as ItemError).message).toMatch(/waiting for room in stage b/)
    expect(seenByA).toEqual([1])
    g.open()
    expect(await first).toBe(1)
    await ex.close()
  })

  it('instances: a TS stage runs that many batches at once; bad instance and bound values are refused', async () => {
    const gates: (() => void)[] = []
    let running = 0
    let most = 0
    const p = definePipeline({
      name: 'p',
      input,
      stages: [
        stage<{ x: number }, number>({
          name: 'io',
          batch: { maxBatchSize: 1 },
          instances: 2,
          run: async (xs) => {
            most = Math.max(most, ++running)
            await new Promise<void>((r) => gates.push(r))
            running--
            return xs.map((i) => i.x)
          },
        }),
      ],
    })
    const ex = new PipelineExecutor({ pipeline: p })
    const all = Promise.all([1, 2, 3].map((x) => ex.run({ x }, Infinity)))
    await turns()
    expect(running).toBe(2)
    while (gates.length > 0 || running > 0) {
      gates.splice(0).forEach((r) => r())
      await turns()
    }
    expect(await all).toEqual([1, 2, 3])
    expect(most).toBe(2)
    await ex.close()
    expect(() => stage({ name: 's', instances: 0, run: () => [] })).toThrow(/instances must be an integer >= 1/)
    expect(() => onnxStage({ name: 'm', model: 'm.onnx', maxInflight: 0 })).toThrow(/maxInflight must be/)
    expect(() => new PipelineExecutor({ pipeline: p, maxInflight: { io: 1.5 } })).toThrow(/maxInflight must be/)
  })
})

describe('PipelineExecutor, batch sizes that differ between stages', () => {
  it('splits a batch larger than the next stage takes and merges smaller ones queued behind a busy stage; order kept, the deadline still enforced', async () => {
    const sizes: Record<string, number[]> = { a: [], b: [], c: [] }
    const gates = { b: gatedRunner((xs) => xs), c: gatedRunner((xs) => xs) }
    const rec = (name: 'b' | 'c'): StageRunner => ({
      concurrency: 1,
      run: (items, ctx) => (sizes[name]!.push(items.length), gates[name].runner.run(items, ctx)),
    })
    const p = definePipeline({
      name: 'p',
      input,
      stages: [
        stage<{ x: number }, number>({ name: 'a', batch: { maxBatchSize: 8 }, run: (xs) => (sizes['a']!.push(xs.length), xs.map((i) => i.x)) }),
        stage<number, number>({ name: 'b', batch: { maxBatchSize: 3 }, run: () => [] }),
        stage<number, number>({ name: 'c', batch: { maxBatchSize: 16 }, run: () => [] }),
      ],
    })
    const ex = new PipelineExecutor({ pipeline: p, runnerFor: (s) => (s.name === 'a' ? undefined : rec(s.name as 'b' | 'c')) })
    const inputs = Array.from({ length: 20 }, (_, x) => ({ x }))
    const all = ex.runMany(inputs, Infinity)
    const turn = () => new Promise((r) => setImmediate(r))
    await turn()
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0)
    // c is busy with b's first batch while b runs the rest of the request, 3 at a time.
    for (let i = 0; i < 1000 && sum(sizes['b']!) < 20; i++) {
      gates.b.open()
      await turn()
    }
    // A second request whose deadline passes while it waits behind the busy c.
    const late = ex.runMany([{ x: 100 }, { x: 101 }], Date.now() + 30)
    await new Promise((r) => setTimeout(r, 60))
    for (let i = 0; i < 50; i++) {
      gates.c.open()
      gates.b.open()
      await turn()
    }
    expect(await all).toEqual(inputs.map(({ x }) => x))
    expect(((await late) as ItemError[]).map((e) => e.code)).toEqual(['DEADLINE_EXCEEDED', 'DEADLINE_EXCEEDED'])
    expect(sizes['a']).toEqual([8, 8, 4, 2])
    expect(sizes['b']!.every((n) => n <= 3)).toBe(true)
    expect(sum(sizes['b']!)).toBeGreaterThanOrEqual(20)
    expect(sizes['c']!.every((n) => n <= 16)).toBe(true)
    expect(Math.max(...sizes['c']!)).toBeGreaterThan(3) // b's batches merged in c
    expect(sum(sizes['c']!)).toBe(20) // the late request never reached c
    await ex.close()
  })
})
