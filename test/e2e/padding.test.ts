// Length bucketing with padding: padded batch outputs equal the unpadded per-item outputs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as ort from 'onnxruntime-node'
import { createApp } from '@cohort/gateway'
import { Registry, parsePrometheus } from '@cohort/metrics'
import { InProcessTransport } from '@cohort/transport'
import { CohortWorker, OnnxRunner } from '@cohort/worker'
import { writeModelFixtures, ifStarted } from '@cohort/test-support'

describe('padding and length buckets (masked sequence model)', () => {
  const transport = new InProcessTransport()
  const registry = new Registry()
  let worker: CohortWorker
  let session: ort.InferenceSession
  let app: ReturnType<typeof createApp>

  beforeAll(async () => {
    const fx = writeModelFixtures()
    session = await ort.InferenceSession.create(fx.masked)
    worker = new CohortWorker({
      transport,
      registry,
      runners: [
        new OnnxRunner({ name: 'masked', path: fx.masked, intraOpNumThreads: 1, padding: { maskInput: 'attention_mask', padValue: 1000 } }),
        new OnnxRunner({ name: 'exact', path: fx.masked, intraOpNumThreads: 1 }),
      ],
    })
    await worker.start()
    app = createApp({ transport, registry })
  })
  afterAll(async () => {
    await ifStarted(worker)?.close()
    await ifStarted(session)?.release()
  })

  /** One OIP request (a Promise either way: `app.request` answers a Response or a Promise of one). */
  const infer = (model: string, tokens: number[], mask?: number[]) =>
    Promise.resolve(
      app.request(`/v2/models/${model}/infer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          inputs: [
            { name: 'tokens', datatype: 'FP32', shape: [1, tokens.length], data: tokens },
            ...(mask ? [{ name: 'attention_mask', datatype: 'INT64', shape: [1, mask.length], data: mask }] : []),
          ],
        }),
      }),
    )

  it('hides the mask input from clients and metadata', async () => {
    const meta = await (await app.request('/v2/models/masked')).json()
    expect(meta.inputs.map((i: { name: string }) => i.name)).toEqual(['tokens'])
    const exact = await (await app.request('/v2/models/exact')).json()
    expect(exact.inputs.map((i: { name: string }) => i.name)).toEqual(['tokens', 'attention_mask'])
  })

  it('mixes lengths of one bucket in a batch and returns the unpadded per-item outputs', async () => {
    const lengths = [5, 6, 7, 8, 5, 6, 7, 8, 3, 4, 2, 1, 16, 9]
    const seqs = lengths.map((len, i) => Array.from({ length: len }, (_, k) => (i + 1) * 10 + k))
    const before = parsePrometheus(registry.render())
    const replies = await Promise.all(seqs.map((s) => infer('masked', s)))
    for (const [i, s] of seqs.entries()) {
      expect(replies[i]!.status).toBe(200)
      const body = await replies[i]!.json()
      const alone = await session.run({
        tokens: new ort.Tensor('float32', Float32Array.from(s), [1, s.length]),
        attention_mask: new ort.Tensor('int64', new BigInt64Array(s.length).fill(1n), [1, s.length]),
      })
      const out = Object.fromEntries(body.outputs.map((o: { name: string }) => [o.name, o]))
      expect(out['total'].data).toEqual(Array.from(alone['total']!.data as Float32Array))
      expect(out['scaled'].shape).toEqual([1, s.length])
      expect(out['scaled'].data).toEqual(Array.from(alone['scaled']!.data as Float32Array))
    }
    const after = parsePrometheus(registry.render())
    const key = (k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0)
    const items = key('cohort_batch_size_sum{model="masked"}')
    const batches = key('cohort_batch_size_count{model="masked"}')
    expect(items).toBe(lengths.length)
    // Lengths 5..8 share bucket 8; 3..4 share bucket 4: fewer batches than distinct lengths.
    expect(batches).toBeLessThan(new Set(lengths).size)
  })

  it('without padding, each distinct length is its own group', async () => {
    const seqs = [
      [1, 2, 3],
      [4, 5],
      [6, 7, 8],
    ]
    const replies = await Promise.all(
      seqs.map((s) =>
        infer(
          'exact',
          s,
          s.map(() => 1),
        ),
      ),
    )
    const totals = await Promise.all(replies.map(async (r) => (await r.json()).outputs[0].data[0]))
    expect(totals).toEqual([6, 9, 21])
  })
})
