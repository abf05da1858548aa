/**
 * `cohort bench generate-layout`: the per-step cost of the two KV layouts of the test decoder
 * (docs/generative.md#kv-layout), offline in onnxruntime-node on CPU: a GroupQueryAttention slab
 * (shared past/present buffer, per-row lengths, updated in place) vs a plain concat export (past in,
 * past+1 out, re-packed into a new batch whenever a sequence joins or leaves).
 */
import { intFlag } from '@cohort/cli/args'
import * as ort from 'onnxruntime-node'
import { buildDecoder, TINY_DECODER, type DecoderConfig } from '@cohort/onnx-builder'
import { table } from './report.ts'
import { defineBenchCommand } from './skeleton.ts'

export const GENERATE_LAYOUT_HELP = `cohort bench generate-layout [options]
Per decode step, median ms over the repeats, of the test decoder (width 64, 2 layers, 4 heads; KV
heads = heads so both layouts do the same work): GQA slab (rows of --slab tokens, and rows fitted
to the past rounded up to 64 tokens) vs concat, plus the concat re-pack.
  --batch LIST     running sequences (default 1,16)
  --past LIST      tokens already in each sequence's cache (default 128,512)
  --slab N         slab row length of the GQA layout, tokens (default 1024)
  --repeats N      timed steps per point (default 30)`

const i64 = (a: ArrayLike<number>, dims: number[]) => new ort.Tensor('int64', BigInt64Array.from(Array.from(a, BigInt)), dims)

function median(xs: number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
}

async function timeSteps(n: number, fn: () => Promise<void> | void): Promise<number> {
  await fn()
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await fn()
    out.push(performance.now() - t0)
  }
  return median(out)
}

export const benchGenerateLayoutCommand = defineBenchCommand({
  help: GENERATE_LAYOUT_HELP,
  options: { batch: { type: 'string' }, past: { type: 'string' }, slab: { type: 'string' }, repeats: { type: 'string' } },
  run: async (v) => {
    const batches = String(v['batch'] ?? '1,16')
      .split(',')
      .map(Number)
    const pasts = String(v['past'] ?? '128,512')
      .split(',')
      .map(Number)
    const slab = intFlag('slab', v['slab']) ?? 1024
    const repeats = intFlag('repeats', v['repeats']) ?? 30
    const cfg: DecoderConfig = { ...TINY_DECODER, kvHeads: TINY_DECODER.heads }
    const opts: ort.InferenceSession.SessionOptions = { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all' }
    const gqa = await ort.InferenceSession.create(buildDecoder(cfg), opts)
    const cat = await ort.InferenceSession.create(buildDecoder({ ...cfg, attention: 'concat' }), opts)
    const hd = cfg.hidden / cfg.heads
    const row = cfg.kvHeads * hd
    const names = Array.from({ length: cfg.layers }, (_, i) => [`${i}.key`, `${i}.value`]).flat()
    const rows: string[][] = []
    for (const b of batches) {
      for (const past of pasts) {
        const ids = i64(Array(b).fill(65), [b, 1])
        const pos = i64(Array(b).fill(past), [b, 1])
        // GQA slab: rows [0, past) valid in each slab row; the new token is written at `past`.
        const gqaStep = async (len: number): Promise<number> => {
          const gFeeds: Record<string, ort.Tensor> = { input_ids: ids, position_ids: pos, attention_mask: i64(Array(b * (past + 1)).fill(1), [b, past + 1]) }
          const gFetch: Record<string, ort.Tensor | null> = { logits: null }
          for (const n of names) {
            // One buffer per layer's K or V: past and present are the same (GQA shared).
            const slab = new ort.Tensor('float32', new Float32Array(b * row * len).fill(0.01), [b, cfg.kvHeads, len, hd])
            gFeeds[`past_key_values.${n}`] = slab
            gFetch[`present.${n}`] = slab
          }
          return timeSteps(repeats, async () => {
            await gqa.run(gFeeds, gFetch)
          })
        }
        const gMs = await gqaStep(slab)
        const fitMs = await gqaStep(Math.ceil((past + 1) / 64) * 64)
        // Concat: past of `past` tokens in, a new present of past+1 out.
        const cFeeds: Record<string, ort.Tensor> = { input_ids: ids, position_ids: pos, attention_mask: i64(Array(b * (past + 1)).fill(1), [b, past + 1]) }
        for (const n of names) cFeeds[`past_key_values.${n}`] = new ort.Tensor('float32', new Float32Array(b * row * past).fill(0.01), [b, cfg.kvHeads, past, hd])
        const cMs = await timeSteps(repeats, async () => {
          await cat.run(cFeeds)
        })
        // Re-pack when one sequence leaves: copy the b-1 surviving rows of every layer's K and V.
        const srcs = names.map(() => new Float32Array(b * row * (past + 1)))
        const perSeq = row * (past + 1)
        const repackMs = await timeSteps(repeats, () => {
          for (const s of srcs) {
            const dst = new Float32Array((b - 1) * perSeq)
            for (let r = 1; r < b; r++) dst.set(s.subarray(r * perSeq, (r + 1) * perSeq), (r - 1) * perSeq)
          }
        })
        rows.push([String(b), String(past), gMs.toFixed(3), fitMs.toFixed(3), cMs.toFixed(3), b > 1 ? repackMs.toFixed(3) : '-', (cMs / fitMs).toFixed(2)])
      }
    }
    await gqa.release()
    await cat.release()
    console.log(
      `cohort bench generate-layout: test decoder width ${cfg.hidden}, ${cfg.layers} layers, ${cfg.heads} heads = KV heads, 1 intra-op thread, GQA slab rows ${slab} tokens, median of ${repeats} steps`,
    )
    console.log(table(['running', 'past tokens', `GQA slab ${slab} ms/step`, 'GQA slab fit ms/step', 'concat ms/step', 'concat re-pack ms (one leaves)', 'concat / GQA fit'], rows))
  },
})
