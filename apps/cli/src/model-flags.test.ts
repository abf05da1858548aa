// The model and batching knob tables: every batching field with a flag has its row (checked by the
// same BATCHING_FIELDS bounds as admin patches), help defaults are the libraries' constants, and
// a bad or unknown flag is refused naming it.
import { describe, expect, it } from 'vitest'
import { BATCHING_FIELDS, BATCHING_KEYS, DEFAULT_BATCHING, DEFAULT_START_CAP, MAX_BATCH_SIZE_LIMIT } from '@cohort/batching'
import { DEFAULT_BATCH_TIMEOUT_FLOOR_MS, DEFAULT_ONNX_BATCH_LIMIT, DEFAULT_PAD_VALUE, DEFAULT_TTFT_SLO_MS } from '@cohort/worker'
import { parse } from './args.ts'
import { BATCHING_HELP, BATCHING_KNOBS, MODEL_HELP, MODEL_OPTIONS, modelKnobs } from './model-flags.ts'

const knobs = (args: string[]) => modelKnobs(parse(args, MODEL_OPTIONS).values)

describe('model and batching knobs', () => {
  it('every batching field with a flag has a row', () => {
    for (const key of BATCHING_KEYS) {
      const flag = BATCHING_FIELDS[key].flag
      if (flag !== undefined) {
        expect(Object.keys(BATCHING_KNOBS), key).toContain(flag)
      }
    }
  })

  it('help defaults are the constants', () => {
    expect(BATCHING_HELP).toContain(`(default ${DEFAULT_BATCHING.maxDelayMs})`)
    expect(BATCHING_HELP).toContain(`(default ${DEFAULT_BATCHING.maxQueue})`)
    expect(BATCHING_HELP).toContain(`(default ${DEFAULT_BATCHING.policy}: dispatch`)
    expect(BATCHING_HELP).toContain(`ONNX models ${DEFAULT_ONNX_BATCH_LIMIT}`)
    expect(BATCHING_HELP).toContain(`starts at ${DEFAULT_START_CAP})`)
    expect(BATCHING_HELP).toContain(`max(${DEFAULT_BATCH_TIMEOUT_FLOOR_MS},`)
    expect(BATCHING_HELP).toContain(`(default ${DEFAULT_PAD_VALUE})`)
    expect(MODEL_HELP).toContain(`(default ${DEFAULT_TTFT_SLO_MS})`)
  })

  it('only given values, checked against BATCHING_FIELDS; refusals name the flag', () => {
    expect(knobs([])).toMatchObject({ 'max-batch-size': undefined, policy: undefined, 'max-queue': undefined, model: [] })
    expect(knobs(['--max-batch-size', '8', '--policy', 'deadline', '--model', 'demo'])).toMatchObject({ 'max-batch-size': 8, policy: 'deadline', model: ['demo'] })
    expect(() => knobs(['--max-batch-size', String(MAX_BATCH_SIZE_LIMIT + 1)])).toThrow(new RegExp(`--max-batch-size must be ${BATCHING_FIELDS.maxBatchSize.expect}`))
    expect(() => knobs(['--policy', 'fifo'])).toThrow(/--policy must be one of eager, timer, deadline, got "fifo"/)
    expect(() => knobs(['--max-batch-cost', '0'])).toThrow(/--max-batch-cost must be a number > 0/)
    expect(() => knobs(['--pad-value', 'x'])).toThrow(/--pad-value must be a number, got "x"/)
    expect(knobs(['--pad-value=-1'])['pad-value']).toBe(-1)
    expect(() => knobs(['--max-tenant-queue', '1.5'])).toThrow(/--max-tenant-queue must be an integer >= 0/)
    expect(() => parse(['--max-batch', '8'], MODEL_OPTIONS)).toThrow(/unknown option --max-batch /)
  })
})
