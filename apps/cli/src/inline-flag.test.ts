// --inline-run-ms: the ONNX runners' inline lane threshold from the command line (an operator can
// keep every batch off the main thread, or widen the lane), checked like every knob.
import { afterEach, describe, expect, it } from 'vitest'
import type { WireTensor } from '@cohort/protocol'
import { identityModelFile } from '@cohort/test-support'
import type { OnnxRunner } from '@cohort/worker'
import { CliError } from './cli-error.ts'
import { modelKnobs } from './model-flags.ts'
import { buildRunners } from './runners.ts'

const FEATURES = 64

function rows(n: number): unknown[] {
  const src: Record<string, WireTensor> = { in: { datatype: 'FP32', shape: [n, FEATURES], bytes: new Uint8Array(new Float32Array(n * FEATURES).fill(0.5).buffer) } }
  return Array.from({ length: n }, (_, row) => ({ src, row }))
}

let open: OnnxRunner | undefined
afterEach(async () => {
  await open?.close()
  open = undefined
})

async function runner(inlineRunMs: number | undefined): Promise<OnnxRunner> {
  const path = identityModelFile(FEATURES, 'cohort-inline-flag-')
  const { runners } = await buildRunners({ model: [`id=${path}`], predictor: [], ep: 'cpu', instances: 1, threads: 1, maxBatchSize: undefined, maxDelayMs: undefined, inlineRunMs })
  open = runners[0] as OnnxRunner
  await open.start()
  return open
}

describe('--inline-run-ms', () => {
  it('is a number of ms >= 0, refused with the flag named otherwise', () => {
    expect(modelKnobs({ 'inline-run-ms': '5' })['inline-run-ms']).toBe(5)
    expect(modelKnobs({})['inline-run-ms']).toBeUndefined()
    expect(() => modelKnobs({ 'inline-run-ms': '-1' })).toThrow(CliError)
    expect(() => modelKnobs({ 'inline-run-ms': 'soon' })).toThrow(/--inline-run-ms/)
  })

  it('0 sends every batch of an ONNX model to the ORT thread', async () => {
    const r = await runner(0)
    for (let i = 0; i < 3; i++) {
      await r.runBatch(rows(1))
    }
    expect(r.lanes.inline).toBe(0)
  })

  it('a wide threshold runs a microsecond model on the main thread (5 ms: a loaded machine cannot push it off)', async () => {
    const r = await runner(5)
    for (let i = 0; i < 3; i++) {
      await r.runBatch(rows(1))
    }
    expect(r.lanes.inline).toBe(3)
  })
})
