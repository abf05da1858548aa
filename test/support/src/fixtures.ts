import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildDemoMlp, buildIdentityAllTypes, buildMaskedSequenceModel, buildMultiIoModel, buildVariableLengthModel } from '@cohort/onnx-builder'

/** Paths of the ONNX models the suites serve. */
export interface ModelFixtures {
  dir: string
  demo: string
  multiIo: string
  identity: string
  varlen: string
  masked: string
}

/** Write the test models to a fresh temp dir. */
export function writeModelFixtures(): ModelFixtures {
  const dir = mkdtempSync(join(tmpdir(), 'cohort-models-'))
  const write = (name: string, bytes: Uint8Array) => {
    const p = join(dir, name)
    writeFileSync(p, bytes)
    return p
  }
  return {
    dir,
    demo: write('demo.onnx', buildDemoMlp(42)),
    multiIo: write('multi-io.onnx', buildMultiIoModel()),
    identity: write('identity.onnx', buildIdentityAllTypes()),
    varlen: write('varlen.onnx', buildVariableLengthModel()),
    masked: write('masked.onnx', buildMaskedSequenceModel()),
  }
}

/** Path of the sleep-based test predictor module. */
export const SLEEPY_PREDICTOR = new URL('../../fixtures/sleepy-predictor.ts', import.meta.url).pathname
/** A predictor that busy-computes, hangs, spins, exits its thread or breaks its output schema on request. */
export const BUSY_PREDICTOR = new URL('../../fixtures/busy-predictor.ts', import.meta.url).pathname
