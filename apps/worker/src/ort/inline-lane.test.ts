import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { graph, model, node, valueInfo } from '@cohort/onnx-builder'
import { countPerRequest } from '@cohort/test-support'
import type { WireTensor } from '@cohort/protocol'
import { OnnxRunner } from '../runners/onnx-runner.ts'
import { InlineLane, RunTimes } from './inline-lane.ts'

const FEATURES = 64

/** An Identity of 64 floats: a run is a copy, microseconds. */
function tinyModel(): string {
  const p = join(mkdtempSync(join(tmpdir(), 'cohort-inline-')), 'identity.onnx')
  const g = graph({
    name: 'id',
    inputs: [valueInfo('in', 'FP32', ['batch', FEATURES])],
    outputs: [valueInfo('out', 'FP32', ['batch', FEATURES])],
    nodes: [node('Identity', ['in'], ['out'])],
  })
  writeFileSync(p, model(g))
  return p
}

function rows(n: number): unknown[] {
  const src: Record<string, WireTensor> = { in: { datatype: 'FP32', shape: [n, FEATURES], bytes: new Uint8Array(new Float32Array(n * FEATURES).fill(0.5).buffer) } }
  return Array.from({ length: n }, (_, row) => ({ src, row }))
}

describe('RunTimes', () => {
  it('predicts nothing before a run, the fastest of the bucket once seen, and scales up from a smaller bucket', () => {
    const t = new RunTimes()
    expect(t.predict(1)).toBeUndefined()
    t.observe(1, 0.1)
    expect(t.predict(1)).toBeCloseTo(0.1)
    // 100 rows, bucket 128, unseen: 0.1 ms per row from bucket 1.
    expect(t.predict(100)).toBeCloseTo(10)
    t.observe(100, 0.7)
    t.observe(100, 0.2)
    t.observe(100, 0.9)
    expect(t.predict(100)).toBeCloseTo(0.2)
  })

  it('forgets a fast run 8 runs later (a model that got slower is predicted slower)', () => {
    const t = new RunTimes()
    t.observe(1, 0.1)
    for (let i = 0; i < 7; i++) {
      t.observe(1, 0.5)
    }
    expect(t.predict(1)).toBeCloseTo(0.1)
    t.observe(1, 0.5)
    expect(t.predict(1)).toBeCloseTo(0.5)
  })
})

describe('InlineLane.run', () => {
  it('reads the process CPU time only around a run after one whose wall time was over cpuCheckMs, at most once per 25 ms (no getrusage per run)', async () => {
    const lane = (await InlineLane.open(tinyModel()))!
    const feeds = { in: { type: 'float32', dims: [1, FEATURES], data: new Float32Array(FEATURES).fill(0.5) } }
    const spy = vi.spyOn(process, 'cpuUsage')
    try {
      await lane.run(feeds, 1_000) // the first run reads it (nothing seen yet)
      expect(spy).toHaveBeenCalledTimes(2)
      for (let i = 0; i < 10; i++) {
        const r = await lane.run(feeds, 1_000) // microseconds, far under 1 s: not read again
        expect(r.outputs['out']?.dims).toEqual([1, FEATURES])
      }
      expect(spy).toHaveBeenCalledTimes(2)
      await new Promise((r) => setTimeout(r, 30))
      await lane.run(feeds, 0) // over 0 ms, 25 ms after the last reading: the next run reads it
      await lane.run(feeds, 1_000)
      expect(spy).toHaveBeenCalledTimes(4)
    } finally {
      spy.mockRestore()
      await lane.close()
    }
  })

  it('reads it no more than once per cpuCheckEveryMs however many runs are over cpuCheckMs', async () => {
    const lane = (await InlineLane.open(tinyModel(), { cpuCheckEveryMs: 600_000 }))!
    const feeds = { in: { type: 'float32', dims: [1, FEATURES], data: new Float32Array(FEATURES).fill(0.5) } }
    const spy = vi.spyOn(process, 'cpuUsage')
    try {
      for (let i = 0; i < 6; i++) {
        await lane.run(feeds, 0) // every one over 0 ms
      }
      expect(spy).toHaveBeenCalledTimes(2) // the first run's reading only
    } finally {
      spy.mockRestore()
      await lane.close()
    }
  })
})

describe('the inline lane of an ONNX runner', () => {
  const runners: OnnxRunner[] = []
  afterEach(async () => {
    for (const r of runners.splice(0)) {
      await r.close()
    }
  })
  // inlineRunMs 5 unless a test sets it: a loaded machine stretches a microsecond run's wall time
  // past the 0.25 ms default, and these tests check the lanes, not the machine's speed.
  async function started(opts: { inlineRunMs?: number } = {}): Promise<OnnxRunner> {
    const r = new OnnxRunner({ name: 'id', path: tinyModel(), intraOpNumThreads: 1, inlineRunMs: 5, ...opts })
    runners.push(r)
    await r.start()
    return r
  }

  it('runs a tiny model on the calling thread: no postMessage per batch, the right outputs', async () => {
    const r = await started()
    const c = await countPerRequest(() => r.runBatch(rows(1)), 20, 2)
    expect({ postMessages: c.postMessages, inline: r.lanes.inline, pool: r.lanes.pool }).toEqual({ postMessages: 0, inline: 22, pool: 1 /* the warm-up at start */ })
    const [out] = await r.runBatch(rows(1))
    const t = (out as { tensors: Record<string, WireTensor> }).tensors['out']
    expect(t?.shape).toEqual([1, FEATURES])
    expect([...new Float32Array(t!.bytes.slice().buffer)].every((v) => v === 0.5)).toBe(true)
  })

  it('hands a batch predicted over inlineRunMs to the pool (16,384 rows: 16,384x the fastest one-row run), one postMessage', async () => {
    const r = await started()
    const c = await countPerRequest(() => r.runBatch(rows(16_384)), 1, 0)
    expect({ postMessages: c.postMessages, pool: r.lanes.pool }).toEqual({ postMessages: 1, pool: 2 })
  })

  it('hands a batch with work waiting behind it to the pool (one postMessage each) and runs a lone batch inline', async () => {
    const r = await started()
    const signal = new AbortController().signal
    const waiting = await countPerRequest(() => r.runBatch(rows(1), signal, { behind: 3 }), 4, 0)
    expect({ postMessages: waiting.postMessages, inline: r.lanes.inline, pool: r.lanes.pool }).toEqual({ postMessages: 1, inline: 0, pool: 5 /* 1 warm-up */ })
    const lone = await countPerRequest(() => r.runBatch(rows(1), signal, { behind: 0 }), 4, 0)
    expect({ postMessages: lone.postMessages, inline: r.lanes.inline, pool: r.lanes.pool }).toEqual({ postMessages: 0, inline: 4, pool: 5 })
  })

  it('keeps no inline lane for a model whose one-row run is over inlineRunMs', async () => {
    // No run takes a nanosecond: the model is "heavy" against this limit.
    const r = await started({ inlineRunMs: 1e-6 })
    const c = await countPerRequest(() => r.runBatch(rows(1)), 5, 0)
    expect({ postMessages: c.postMessages, inline: r.lanes.inline }).toEqual({ postMessages: 1, inline: 0 })
  })

  it("reports each batch's time inside onnxruntime in opts.measured, on either lane (what the engine learns)", async () => {
    for (const inlineRunMs of [5, 0]) {
      const r = await started({ inlineRunMs })
      const measured: { computeMs?: number } = {}
      await r.runBatch(rows(4), new AbortController().signal, { measured })
      expect(measured.computeMs).toBeGreaterThanOrEqual(0)
      expect(measured.computeMs).toBeLessThan(1_000)
    }
  })

  it('inlineRunMs 0 disables the lane: every batch goes to the pool', async () => {
    const r = await started({ inlineRunMs: 0 })
    const c = await countPerRequest(() => r.runBatch(rows(1)), 5, 0)
    expect({ postMessages: c.postMessages, inline: r.lanes.inline, pool: r.lanes.pool }).toEqual({ postMessages: 1, inline: 0, pool: 6 })
  })
})
